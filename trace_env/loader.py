"""Load an env module from source text and find its :class:`TaskEnv`.

Executing env source runs its code: call this only where that is allowed - inside a sandbox worker, for
the trusted built-in blueprints, or under the explicitly unsafe backend.
"""

from __future__ import annotations

import hashlib
import sys
import types

from trace_env.errors import TraceEnvError
from trace_env.sdk import TaskEnv


class EnvLoadError(TraceEnvError, ValueError):
    """The source does not define a usable env; the message says what is missing."""


def load_env_class(source: str, module_name: str | None = None) -> type[TaskEnv]:
    """Execute ``source`` as a fresh module and return its env class (``ENV``, or the one TaskEnv subclass)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    name = module_name or f"trace_env_{digest}"
    module = types.ModuleType(name)
    module.__file__ = f"<env {name}>"
    try:
        code = compile(source, module.__file__, "exec")
    except SyntaxError as exc:
        raise EnvLoadError(f"env source has a syntax error at line {exc.lineno}: {exc.msg}") from None
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise EnvLoadError(f"env module raised on import: {type(exc).__name__}: {exc}") from exc
    return find_env_class(module)


def find_env_class(module: types.ModuleType) -> type[TaskEnv]:
    explicit = getattr(module, "ENV", None)
    if isinstance(explicit, type) and issubclass(explicit, TaskEnv):
        return explicit
    candidates = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, TaskEnv) and value is not TaskEnv and value.__module__ == module.__name__
    ]
    if len(candidates) != 1:
        found = ", ".join(c.__name__ for c in candidates) or "none"
        raise EnvLoadError(
            f"env module must define exactly one sdk.TaskEnv subclass or set ENV = <class>; found {found}"
        )
    return candidates[0]


def load_env(source: str, module_name: str | None = None) -> TaskEnv:
    env_class = load_env_class(source, module_name)
    missing = [attr for attr in ("capability", "target") if not getattr(env_class, attr, "")]
    if missing:
        raise EnvLoadError(f"env class {env_class.__name__} does not set {', '.join(missing)}")
    return env_class()
