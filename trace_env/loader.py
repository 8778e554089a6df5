"""Load an env module from source text and find its :class:`TaskEnv`.

Executing env source runs its code: call this only where that is allowed - inside a sandbox worker, for
the trusted built-in blueprints, or under the explicitly unsafe backend.
"""

from __future__ import annotations

import ast
import hashlib
import sys
import types

from trace_env.errors import TraceEnvError
from trace_env.sdk import TaskEnv
from trace_env.shared_state import SharedState, imported_kits, preload


class EnvLoadError(TraceEnvError, ValueError):
    """The source does not define a usable env; the message says what is missing."""


class EnvProgram:
    """Env source compiled once; :meth:`fresh` runs it into a new module object and returns a new env.

    The handler asks for a fresh env at every ``reset`` and before every gate-only call, so class attributes
    and module globals start clean each episode, in the gate and in training alike: nothing env code keeps
    there can tell a worker's thousandth episode from its first, or whether the gate called a solution. The
    kits it imports are loaded before its code first runs, and their shared containers are put back before
    every run (:mod:`trace_env.shared_state`), so nothing survives there either.
    """

    def __init__(self, source: str, module_name: str | None = None) -> None:
        digest = hashlib.sha256(source.encode()).hexdigest()[:12]
        self.name = module_name or f"trace_env_{digest}"
        self.filename = f"<env {self.name}>"
        try:
            tree = ast.parse(source, self.filename)
            self.code = compile(tree, self.filename, "exec")
        except SyntaxError as exc:
            raise EnvLoadError(f"env source has a syntax error at line {exc.lineno}: {exc.msg}") from None
        except ValueError as exc:  # a NUL byte in the source
            raise EnvLoadError(f"env source cannot be compiled: {exc}") from None
        preload(imported_kits(tree))
        self.shared = SharedState()

    def module(self) -> types.ModuleType:
        """A new module object with the env's code run in it (registered in ``sys.modules`` under the one
        name, replacing the last: dataclasses and pickling look classes up there)."""
        self.shared.restore()
        module = types.ModuleType(self.name)
        module.__file__ = self.filename
        sys.modules[self.name] = module
        try:
            exec(self.code, module.__dict__)
        except Exception as exc:
            sys.modules.pop(self.name, None)
            raise EnvLoadError(f"env module raised on import: {type(exc).__name__}: {exc}") from exc
        return module

    def env_class(self) -> type[TaskEnv]:
        return find_env_class(self.module())

    def fresh(self) -> TaskEnv:
        """A new env instance of a newly executed module."""
        env_class = self.env_class()
        missing = [attr for attr in ("capability", "target") if not getattr(env_class, attr, "")]
        if missing:
            raise EnvLoadError(f"env class {env_class.__name__} does not set {', '.join(missing)}")
        return env_class()


def load_env_class(source: str, module_name: str | None = None) -> type[TaskEnv]:
    """Execute ``source`` as a fresh module and return its env class (``ENV``, or the one TaskEnv subclass)."""
    return EnvProgram(source, module_name).env_class()


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
    return EnvProgram(source, module_name).fresh()
