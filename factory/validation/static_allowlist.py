"""The modules env code may import, as data. Host side.

:mod:`factory.validation.static` (a quality filter, not a security boundary) refuses imports of anything else:
an env is pure computation over its scenario, so the SDK, the kits and the pure-computation stdlib modules are
all it needs; any other import (files, processes, the network, the clock) is a sign the env will not be
deterministic or will not run in the sandbox.
"""

from __future__ import annotations

import importlib
import importlib.util
import types
from functools import lru_cache
from typing import Any

#: SDK modules (the legacy ``env_registry.sdk`` spelling is served by the same module inside the sandbox).
SDK_ALIASES = {"trace_env.sdk": "trace_env.sdk", "env_registry.sdk": "trace_env.sdk"}
KITS_PACKAGE = "trace_env.kits"

#: Pure-computation stdlib modules an env may import, by full dotted name.
STDLIB = frozenset({
    "__future__", "abc", "bisect", "calendar", "collections", "collections.abc", "copy", "dataclasses", "datetime",
    "decimal", "enum", "fractions", "functools", "hashlib", "heapq", "itertools", "json", "math", "numbers",
    "operator", "random", "re", "statistics", "string", "textwrap", "typing",
})


def canonical(name: str) -> str:
    return SDK_ALIASES.get(name, name)


def module_allowed(name: str) -> bool:
    if name in STDLIB or name in SDK_ALIASES:
        return True
    return name.startswith(KITS_PACKAGE + ".") and _kit_exists(name)


@lru_cache(maxsize=None)
def _kit_exists(name: str) -> bool:
    rest = name[len(KITS_PACKAGE) + 1:]
    if not rest or any(not part.isidentifier() or part.startswith("_") for part in rest.split(".")):
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@lru_cache(maxsize=None)
def _module(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(canonical(name))
    except Exception:  # noqa: BLE001 - an unimportable kit: nothing of it can be imported
        return None


MISSING = object()


def value_of(module: str, attr: str) -> Any:
    """What ``from module import attr`` would bind (a kit's submodule included), or :data:`MISSING`."""
    mod = _module(module)
    if mod is None:
        return MISSING
    value = getattr(mod, attr, MISSING)
    if value is MISSING and canonical(module).startswith(KITS_PACKAGE) and module_allowed(f"{canonical(module)}.{attr}"):
        value = _module(f"{canonical(module)}.{attr}") or MISSING
    return value
