"""Inside the sandbox: the mutable values env code shares with every episode, put back before each one.

The handler executes the env module anew at every ``reset`` (and before every gate-only call), so nothing the
env keeps in its own module survives an episode. What it imports is another matter: the SDK and the kits are
imported once per worker, and their module-level lists, dicts and sets (``CABINS``, ``CATALOG``,
``FIRST_NAMES``...) are the same objects in every episode. Code that appends to one, shuffles it or stores a
key in it (``list.append(kit.CABINS, x)``, ``random.shuffle(kit.FIRST_NAMES)``, ``operator.setitem(...)``)
could count the episodes a worker served and behave well only for the first few, which the gate plays and a
training worker, living for a whole run, outlives.

No lint rule can list every spelling of "mutate this object", so this module closes it by construction: the
containers reachable from those modules are recorded (their items, by identity) before any env code runs, and
each one that changed is restored in place before the env module runs again. Rebinding a module global or a
class attribute is a different thing, caught by the worker's integrity check (``sandbox.integrity``).

The standard library keeps caches of its own that env code fills without asking: ``typing`` memoises every
subscription, so ``List[Leg]`` over the env's freshly executed class keeps that episode's whole module alive
(up to 128 of them). Those caches are emptied before each run too (a few microseconds). ``re``'s pattern cache
is left alone: the kits' text matching compiles its word patterns through it, and emptying it every episode
cost 60% more CPU per blueprint episode; what it holds is patterns, never an env's objects.

Stdlib only, trusted code; the restore costs a comparison of items by identity per container.
"""

from __future__ import annotations

import ast
import importlib
import sys
import types
import typing
from operator import is_
from typing import Any

#: Modules env code may import whose state is shared across episodes: the SDK and every kit module.
SHARED_PREFIXES = ("trace_env.kits",)
SHARED_MODULES = ("trace_env.sdk",)
_MAX_DEPTH = 8


def imported_kits(tree: ast.AST) -> list[str]:
    """The ``trace_env.kits`` modules an env module imports (``import trace_env.kits.x``,
    ``from trace_env.kits import x``, ``from trace_env.kits.x import y``)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("trace_env.kits")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "trace_env.kits":
                found += [f"trace_env.kits.{a.name}" for a in node.names if a.name != "*"]
            elif node.module.startswith("trace_env.kits."):
                found.append(node.module)
    return found


def preload(modules: list[str]) -> None:
    """Import the kits an env names before any of its code runs, so their state is recorded untouched (a
    name that is not a module is left for the env's own import to report)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the env's import statement reports it, in the env's words
            continue


def _shared(name: str) -> bool:
    return name in SHARED_MODULES or any(name == p or name.startswith(p + ".") for p in SHARED_PREFIXES)


class SharedState:
    """The mutable containers of the shared modules, each with its items as recorded (by identity)."""

    def __init__(self) -> None:
        self._lists: list[tuple[list[Any], list[Any]]] = []
        self._dicts: list[tuple[dict[Any, Any], list[Any], list[Any]]] = []
        self._sets: list[tuple[set[Any], list[Any], set[int]]] = []
        self._bytes: list[tuple[bytearray, bytes]] = []
        self._seen: set[int] = set()
        self._modules: set[str] = set()
        self.capture()

    def capture(self) -> None:
        """Record the containers of every shared module loaded since the last capture."""
        for name, module in list(sys.modules.items()):
            if isinstance(module, types.ModuleType) and name not in self._modules and _shared(name):
                self._modules.add(name)
                for value in list(vars(module).values()):
                    self._add(value, 0)
                    if isinstance(value, type) and value.__module__ == name:
                        for attr in list(vars(value).values()):
                            self._add(attr, 0)

    def _add(self, value: Any, depth: int) -> None:
        kind = type(value)
        if depth > _MAX_DEPTH or kind not in (list, dict, set, tuple, bytearray) or id(value) in self._seen:
            return
        self._seen.add(id(value))
        if kind is list:
            self._lists.append((value, list(value)))
            items: Any = value
        elif kind is dict:
            self._dicts.append((value, list(value), list(value.values())))
            items = list(value.values())
        elif kind is set:
            self._sets.append((value, list(value), set(map(id, value))))
            items = value
        elif kind is bytearray:
            self._bytes.append((value, bytes(value)))
            return
        else:
            items = value
        for item in list(items):
            self._add(item, depth + 1)

    def restore(self) -> int:
        """Put back every container that changed and empty typing's caches; returns how many containers
        changed."""
        clear_stdlib_caches()
        changed = 0
        for items, saved in self._lists:
            if len(items) != len(saved) or not all(map(is_, items, saved)):
                items[:] = saved
                changed += 1
        for table, keys, values in self._dicts:
            if (len(table) != len(keys) or not all(map(is_, table, keys))
                    or not all(map(is_, table.values(), values))):
                table.clear()
                table.update(zip(keys, values))
                changed += 1
        for members, saved, ids in self._sets:
            if len(members) != len(saved) or set(map(id, members)) != ids:
                members.clear()
                members.update(saved)
                changed += 1
        for buffer, data in self._bytes:
            if buffer != data:
                buffer[:] = data
                changed += 1
        return changed


def clear_stdlib_caches() -> None:
    """Empty ``typing``'s subscription caches (see the module docstring)."""
    for clear in list(getattr(typing, "_cleanups", ())):
        try:
            clear()
        except Exception:  # noqa: BLE001 - a cache that cannot be cleared is left as it is
            continue
