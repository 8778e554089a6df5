"""Where a module or a class factory may appear, for the lint in :mod:`factory.validation.static`. Host side.

A first pass finds every name that is a module (made by an import, and only so) or a class factory (imported,
or one of the file's own classes that derives from one); the lint then keeps each to its allowed positions: a
module only in front of an allowed attribute, a factory only in ``isinstance``, called with one argument, as
``metaclass=`` (a metaclass) or as the base of an enum that has members (an enum). That way neither ever reaches
a name the lint does not see.
"""

from __future__ import annotations

import ast
import enum
import types

from factory.validation import static_format
from factory.validation.static_allowlist import (
    KITS_PACKAGE, MISSING, SDK_ALIASES, STRING_CLASS_BUILDERS, canonical, is_factory, is_metaclass, module_allowed,
    pair_allowed, value_of,
)

FACTORY_USE = ("in isinstance/issubclass, called with one argument, as metaclass= (a metaclass) or as the base "
               "of an enum with members (an enum)")


class Positions:
    """The names the first pass found, and the position checks the lint calls on each use of one."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}  # local name -> module it is bound to (by an import, and only so)
        self.factories: set[str] = set()  # local names of class factories (imported, or the file's own classes)
        self.metaclasses: set[str] = set()  # those of them whose instances are classes (abc.ABCMeta...)
        self.imported: dict[str, tuple[str, str]] = {}  # local name -> (module, attribute) it was imported as
        self.clock_roots: set[str] = set()  # names that hold datetime's classes (datetime, date...)
        self.string_builders: set[str] = set()  # local names of typing.NamedTuple, collections.namedtuple...
        self.parent: dict[int, ast.AST] = {}
        self.templates = static_format.Templates()

    def refuse(self, line: int, message: str) -> None:
        raise NotImplementedError

    # -- a first pass: which names are modules and which are class factories ------------------------------
    def prepare(self, tree: ast.AST) -> None:
        nodes: list[ast.AST] = [tree]  # one walk of the tree, breadth first like ast.walk, noting each parent
        for node in nodes:
            for child in ast.iter_child_nodes(node):
                self.parent[id(child)] = node
                nodes.append(child)
        classes = [n for n in nodes if isinstance(n, ast.ClassDef)]
        if isinstance(tree, ast.Module):
            self.templates = static_format.prepare(tree, self.parent, nodes)
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if module_allowed(alias.name) and (alias.asname or "." not in alias.name):
                        self.modules[alias.asname or alias.name] = canonical(alias.name)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                for alias in node.names:
                    self._prepare_from(node.module, alias)
        changed = True
        while changed:  # the file's classes that derive from a factory (a metaclass, an enum) are factories too
            changed = False
            for node in classes:
                if node.name not in self.factories and any(self._factory_expr(b) for b in node.bases):
                    self.factories.add(node.name)
                    changed = True
                if node.name not in self.metaclasses and any(self._metaclass_expr(b) for b in node.bases):
                    self.metaclasses.add(node.name)
                    changed = True

    def _prepare_from(self, module: str, alias: ast.alias) -> None:
        full = f"{module}.{alias.name}"
        local = alias.asname or alias.name
        if full in SDK_ALIASES or full == KITS_PACKAGE or (module == KITS_PACKAGE and module_allowed(full)):
            self.modules[local] = canonical(full)
        elif module_allowed(module) and pair_allowed(module, alias.name):
            value = value_of(canonical(module), alias.name)
            self.imported[local] = (canonical(module), alias.name)
            if is_metaclass(value):
                self.metaclasses.add(local)
            if (canonical(module), alias.name) in STRING_CLASS_BUILDERS:
                self.string_builders.add(local)
            elif isinstance(value, types.ModuleType):
                self.modules[local] = value.__name__
            elif is_factory(value):
                self.factories.add(local)
            elif module == "datetime":
                self.clock_roots.add(local)

    def _resolve(self, node: ast.AST) -> str | None:
        """The module an expression names (``json``, ``sdk``, ``kits.tau2_airline``...), or None."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value)
            if base is not None and pair_allowed(base, node.attr):
                value = value_of(base, node.attr)
                return value.__name__ if isinstance(value, types.ModuleType) else None
        return None

    def _factory_expr(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.factories
        return is_factory(self._stdlib_value(node))

    def _metaclass_expr(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.metaclasses
        return is_metaclass(self._stdlib_value(node))

    def _has_member(self, node: ast.ClassDef) -> bool:
        """Does the class body give an enum a canonical member: a name bound to a constant or a display (for a flag,
        to a power of two), or to enum.auto()? An enum with one cannot be extended or called with a dict; one
        without (a flag's 0 or 3 is only an alias) is a class factory."""
        flag = any(isinstance(v, type) and issubclass(v, enum.Flag) for v in map(self._stdlib_value, node.bases))
        for stmt in node.body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
            value = getattr(stmt, "value", None)
            if value is None or not all(isinstance(t, ast.Name) for t in targets):
                continue
            if isinstance(value, ast.Call) and not value.args and not value.keywords and self._is_auto(value.func):
                return True
            if flag:
                if isinstance(value, ast.Constant) and type(value.value) is int and value.value > 0 \
                        and value.value & (value.value - 1) == 0:
                    return True
            elif isinstance(value.operand if isinstance(value, ast.UnaryOp) else value,
                            (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.JoinedStr)):
                return True
        return False

    def _stdlib_value(self, node: ast.AST) -> object:
        """The stdlib value a name imported from a module, or an allowed ``module.attribute``, stands for."""
        if isinstance(node, ast.Name) and node.id in self.imported:
            return value_of(*self.imported[node.id])
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value)
            if base is not None and pair_allowed(base, node.attr):
                return value_of(base, node.attr)
        return MISSING

    def _is_auto(self, node: ast.expr) -> bool:
        return self._stdlib_value(node) is enum.auto

    # -- positions -----------------------------------------------------------------------------------------
    def _up(self, node: ast.AST) -> ast.AST | None:
        return self.parent.get(id(node))

    def _module_position(self, node: ast.expr, what: str) -> None:
        up = self._up(node)
        if isinstance(up, ast.Attribute) and up.value is node:
            return
        self.refuse(node.lineno, f"module {what!r} may only be used as '{what}.<attribute>' (a module is never "
                                 "assigned, passed, stored or returned)")

    def _factory_position(self, node: ast.expr, what: str) -> None:
        up = self._up(node)
        if isinstance(up, ast.ClassDef) and node in up.bases:
            if self._metaclass_expr(node):
                self.refuse(node.lineno, f"{what!r} is a metaclass: as a base class it makes another class factory "
                                         "(and an enum mixed with it builds its members as classes); use it only as metaclass=")
            elif not self._has_member(up):
                self.refuse(up.lineno, f"enum class {up.name!r} has no member, so calling it with a name and a dict "
                                       "builds a class: give it a member (NAME = a literal, a power of two for a flag, or enum.auto())")
            return
        if isinstance(up, ast.keyword) and up.arg == "metaclass" and isinstance(self._up(up), ast.ClassDef):
            return
        if isinstance(up, (ast.Attribute, ast.Subscript)) and up.value is node:
            return
        if isinstance(up, (ast.For, ast.AsyncFor, ast.comprehension)) and up.iter is node:
            return
        if isinstance(up, ast.Call) and up.func is node and len(up.args) == 1 and not up.keywords \
                and not isinstance(up.args[0], ast.Starred):
            return
        call = self._up(up) if isinstance(up, ast.Tuple) else up
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in ("isinstance", "issubclass") \
                and len(call.args) == 2 and (call.args[1] is node or call.args[1] is up):
            return
        self.refuse(node.lineno, f"{what!r} builds a class from a name and a dict when called so: use it only {FACTORY_USE}")

    def _string_builder_position(self, node: ast.expr, what: str) -> None:
        up = self._up(node)
        if isinstance(up, ast.ClassDef) and node in up.bases:
            return
        self.refuse(node.lineno, f"{what!r} turns strings into a class and its field names when called: declare "
                                 "the class with a class statement instead (class P(typing.NamedTuple): a: int)")
