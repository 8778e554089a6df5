"""Integrity of the trusted code that runs next to env code, in the env process. Runs INSIDE the sandbox.

The env process holds env code and the project's own code that measures it (``trace_env``: handler, engine,
gate probes; the worker loop). Env code cannot reach the host channel (the shim holds it, :mod:`sandbox.shim`),
but plain Python could still rebind what that trusted code looks up - ``json.dumps``, ``handler.run_episode``,
a kit's method - and so change the replies the env process gives. After every call the worker compares the
state of every trusted module with a snapshot taken before the first env code ran: module globals, class
attributes and function code. A difference ends the env process with a fatal ``IntegrityError`` naming what
changed.

This is a check against Python-level tampering, not a boundary: code that escapes to native level (ctypes)
controls its own process and so its own replies, which the shim relays as that process's answer and the host
validates by shape. It compares states between calls, so plain Python that changes trusted code and puts it
back before the call returns is not seen either (``tests/gate/test_takeover.py`` rewrites the engine's reward
for one call so): what keeps such rewards from a verdict or training is the gate playing episodes as training
does, and the reward audit. The sandbox is the boundary.
"""

from __future__ import annotations

import builtins
import gc
import sys
import types
from operator import attrgetter, is_
from typing import Any, Callable

_CORE = ("trace_env", "sandbox")
_HEAPTYPE = 1 << 9
_code_of = attrgetter("__code__")
_value_of = attrgetter("value")
_all, _map, _len, _list = all, map, len, list


def _version_cells() -> Callable[[dict], Any] | None:
    """``dict -> cell`` whose ``.value`` is the dict's version tag, or None where this interpreter has none.

    CPython 3.11-3.13 give every dict a 64-bit tag (``ma_version_tag``, after the size) that changes on every
    store or delete. Reading ~100 tags per call costs microseconds where comparing ~2,000 values costs a
    hundred. The layout is checked on a probe dict first; without it, every value is compared (same verdict).
    """
    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 13):
        return None
    try:
        import ctypes

        word = ctypes.sizeof(ctypes.c_ssize_t)

        def cell(d: dict) -> Any:
            return ctypes.c_uint64.from_address(id(d) + 3 * word)

        probe: dict[str, int] = {}
        tags = [cell(probe).value]
        for value in (1, 2):
            probe["k"] = value
            tags.append(cell(probe).value)
        size = ctypes.c_ssize_t.from_address(id(probe) + 2 * word).value
        if size != 1 or len(set(tags)) != 3:
            return None
        return cell
    except Exception:  # noqa: BLE001 - no ctypes: compare values
        return None


_cell_of = _version_cells()


def _dict_of(space: Any) -> dict | None:
    """The dict behind a namespace (a class's ``vars()`` is a mappingproxy over one)."""
    if type(space) is dict:
        return space
    inner = [r for r in gc.get_referents(space) if type(r) is dict]
    return inner[0] if len(inner) == 1 else None


def _trusted_modules() -> tuple[list[types.ModuleType], list[types.ModuleType]]:
    """(core, referenced): the protocol, handler, engine and SDK with ``builtins``; and the modules their
    globals name (``json``, ``jsonschema``, ``re``...), whose attributes trusted code looks up at run time."""
    core = [m for name, m in list(sys.modules.items())
            if isinstance(m, types.ModuleType) and (name.split(".")[0] in _CORE or name == "__main__")]
    core.append(builtins)
    seen = {id(m) for m in core}
    referenced = []
    for m in core:
        for v in list(vars(m).values()):
            if isinstance(v, types.ModuleType) and id(v) not in seen and v.__name__ not in ("sys", "os", "posix"):
                seen.add(id(v))
                referenced.append(v)
    return core, referenced


class Snapshot:
    """Identity of what trusted code looks up at run time: module globals, class attributes, function code.

    Per namespace its size and its values (held, compared by identity with ``operator.is_`` in C: a value
    whose ``__eq__`` lies changes nothing); only on a difference is the detail worked out. Where the
    interpreter keeps dict version tags, a namespace whose tag has not moved is not compared at all.
    """

    def __init__(self) -> None:
        self.spaces: list[tuple[str, Any, int, list[Any]]] = []
        self._cells: list[Any] | None = [] if _cell_of is not None else None
        self._tags: list[int] = []
        self._funcs: list[types.FunctionType] = []
        self._codes: list[types.CodeType] = []
        self._labels: list[str] = []
        core, referenced = _trusted_modules()
        self._seen: set[int] = set()
        self._modules = {id(m) for m in core + referenced}
        self._count = len(sys.modules)
        for module in core:
            self._add(module.__name__, vars(module), module.__name__, deep=True)
        for module in referenced:
            self._add(module.__name__, vars(module), module.__name__, deep=False)

    @property
    def codes(self) -> list[tuple[str, types.FunctionType, types.CodeType]]:
        return list(zip(self._labels, self._funcs, self._codes))

    def _adopt_new_modules(self) -> None:
        """Trusted modules imported since (a kit the env imports): covered from the end of that call on."""
        if len(sys.modules) == self._count:
            return
        self._count = len(sys.modules)
        for name, module in list(sys.modules.items()):
            if (isinstance(module, types.ModuleType) and name.split(".")[0] in _CORE
                    and id(module) not in self._modules):
                self._modules.add(id(module))
                self._add(name, vars(module), name, deep=True)

    def _add(self, label: str, space: Any, module: str, deep: bool) -> None:
        self.spaces.append((label, space, len(space), list(space.values())))
        if self._cells is not None:
            inner = _dict_of(space)
            if inner is None or _cell_of is None:
                self._cells = None  # a namespace without a readable tag: compare every value instead
            else:
                self._cells.append(_cell_of(inner))
                self._tags.append(self._cells[-1].value)
        if not deep:
            return
        for name, value in list(space.items()):
            func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if isinstance(value, property):
                func = value.fget
            if isinstance(func, types.FunctionType):
                self._labels.append(f"{label}.{name}")
                self._funcs.append(func)
                self._codes.append(func.__code__)
            elif (isinstance(value, type) and value.__flags__ & _HEAPTYPE and value.__module__ == module
                  and id(value) not in self._seen):
                self._seen.add(id(value))
                self._add(f"{module}.{value.__qualname__}", vars(value), module, deep=True)

    def changes(self) -> list[str]:
        """What differs from the snapshot (new submodule attributes are allowed and absorbed)."""
        found: list[str] = []
        cells = self._cells
        if cells is not None:
            tags = _list(_map(_value_of, cells))
            if tags == self._tags:
                if _all(_map(is_, _map(_code_of, self._funcs), self._codes)):
                    self._adopt_new_modules()
                    return found
                suspects: Any = ()
            else:
                suspects = [i for i, (a, b) in enumerate(zip(tags, self._tags)) if a != b]
                self._tags = tags  # a store that put back the same value is absorbed below
        else:
            suspects = range(len(self.spaces))
        for index in suspects:
            label, space, size, values = self.spaces[index]
            if _len(space) == size and _all(_map(is_, space.values(), values)):
                continue
            here = self._detail(label, space, values)
            if here:
                found += here
            else:  # only submodules appeared (an import): absorb them
                self.spaces[index] = (label, space, len(space), list(space.values()))
        if not _all(_map(is_, _map(_code_of, self._funcs), self._codes)):
            found += [f"the code of {label} was replaced" for label, func, code in self.codes if func.__code__ is not code]
        if not found:
            self._adopt_new_modules()
        return found

    def rebase(self) -> None:
        """Take what is there now as the trusted state: in a process just forked from the one that took this
        snapshot, before any env code runs (the fork's own hooks, threading's, rebind a few globals)."""
        if self._cells is not None:
            tags = _list(_map(_value_of, self._cells))
            moved: Any = [i for i, (a, b) in enumerate(zip(tags, self._tags)) if a != b]
            self._tags = tags
        else:
            moved = range(len(self.spaces))
        for index in moved:
            label, space, size, values = self.spaces[index]
            if _len(space) != size or not _all(_map(is_, space.values(), values)):
                self.spaces[index] = (label, space, len(space), list(space.values()))
        self._codes = [f.__code__ for f in self._funcs]
        self._adopt_new_modules()

    @staticmethod
    def _detail(label: str, space: Any, values: list[Any]) -> list[str]:
        now, before = set(map(id, space.values())), set(map(id, values))
        gone = [v for v in values if id(v) not in now]
        added = [k for k, v in list(space.items()) if id(v) not in before and not isinstance(v, types.ModuleType)]
        out = [f"{label}.{k} was replaced or added" for k in added]
        if gone and not added:
            out.append(f"{label}: {len(gone)} attribute(s) deleted")
        return out
