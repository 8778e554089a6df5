"""Static check: a strict lint of an env module's syntax tree (never by running it). Host side.

It is a FIRST FILTER, not the security boundary: the sandbox is. Its job is to refuse, with a line number,
every construct an env module has no business using, so that LLM-written code that reaches for the
interpreter's internals is turned away before it runs, and so that what does run is plain, deterministic
Python the gate's checks can reason about. The rules (README "Rules for env modules"):

- imports: the SDK (``from trace_env import sdk``, legacy ``from env_registry import sdk``), kits
  (``from trace_env.kits import <kit>``) and allow-listed pure stdlib modules, each by its FULL dotted
  name; every imported name is checked too; an attribute of a module that is itself a module must be an
  allowed module (``dataclasses.builtins``, ``calendar.sys``... are refused);
- no name or attribute that starts with ``_`` (the throwaway ``_``, defining ``__init__`` /
  ``__post_init__`` and calling ``super().__init__`` are fine), in any spelling: names, attributes,
  arguments, keyword arguments, ``match`` class patterns, strings that look like dunders, format fields;
- no introspection or reflection: ``getattr``/``hasattr``/``setattr``/``vars``/``globals``/``eval``/``exec``/
  ``open``/``compile``/``id``/``hash`` as names at all, ``operator.attrgetter``/``methodcaller``,
  ``string.Formatter``, ``typing.get_type_hints``, frame and code attributes (``gi_frame``, ``f_back``...);
- no stores to attributes (or items) of modules, or of names aliasing something taken from a module;
- no clock reads (``datetime.now/today/utcnow/fromtimestamp``, ``date.today``, the ``time`` module).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import string
import types
from dataclasses import dataclass
from functools import lru_cache

#: Pure stdlib modules an env may import, by full dotted name.
ALLOWED_MODULES = frozenset(
    {
        "__future__", "abc", "bisect", "calendar", "collections", "copy", "dataclasses", "datetime", "decimal",
        "enum", "fractions", "functools", "hashlib", "heapq", "itertools", "json", "math", "numbers", "operator",
        "random", "re", "statistics", "string", "textwrap", "typing",
    }
)
#: SDK modules (the legacy ``env_registry.sdk`` spelling is served by the same module inside the sandbox).
SDK_ALIASES = {"trace_env.sdk": "trace_env.sdk", "env_registry.sdk": "trace_env.sdk"}
KITS_PACKAGE = "trace_env.kits"
#: Builtins that reach the interpreter's internals, the file system, the clock or run code.
FORBIDDEN_NAMES = frozenset(
    {
        "getattr", "hasattr", "setattr", "delattr", "vars", "globals", "locals", "dir", "eval", "exec", "compile",
        "open", "id", "hash", "breakpoint", "input", "memoryview", "exit", "quit", "help", "copyright", "credits",
        "license",
    }
)
#: Attribute names refused on any object: reflection by another name (``builtins.getattr``...).
FORBIDDEN_ATTRIBUTES = frozenset(
    {"getattr", "hasattr", "setattr", "delattr", "vars", "globals", "locals", "eval", "exec", "breakpoint"}
)
#: Module attributes refused although public: reflection by name, code evaluation, shared mutable state.
FORBIDDEN_MODULE_ATTRIBUTES = {
    "operator": {"attrgetter", "methodcaller"},
    "string": {"Formatter"},
    "typing": {"get_type_hints", "ForwardRef", "EXCLUDED_ATTRIBUTES"},
    "functools": {"update_wrapper"},
    "copy": {"dispatch_table"},
    "calendar": {"mdays"},
    "hashlib": {"algorithms_available", "algorithms_guaranteed"},
}
#: Attributes of frames, generators, coroutines, tracebacks and code objects: the way to another scope.
INTROSPECTION_ATTRIBUTES = frozenset(
    {
        "gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "gi_suspended", "cr_frame", "cr_code", "cr_await",
        "cr_origin", "cr_running", "ag_frame", "ag_code", "ag_await", "ag_running", "f_back", "f_builtins",
        "f_globals", "f_locals", "f_code", "f_trace", "f_lasti", "f_lineno", "tb_frame", "tb_next", "tb_lasti",
        "tb_lineno", "func_globals", "func_code", "im_func", "im_self", "mro",
    }
)
#: Clock reads: scenario times come from ``self.rng(seed)``.
CLOCK_ATTRIBUTES = frozenset({"now", "today", "utcnow", "fromtimestamp", "utcfromtimestamp"})
#: Methods that mutate a container in place: refused when called on state that belongs to a module.
MUTATING_METHODS = frozenset(
    {"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "setdefault", "add", "discard",
     "sort", "reverse", "appendleft", "extendleft", "popleft", "rotate"}
)
ALLOWED_DUNDER_DEFINITIONS = frozenset({"__init__", "__post_init__"})
_DUNDERISH = re.compile(r"__\w|\w__")

FIRST_FILTER_NOTE = "a first filter; the sandbox is the security boundary"


@dataclass
class StaticFinding:
    line: int
    message: str


def check_source(source: str) -> list[StaticFinding]:
    """Every rule the source breaks, with line numbers; an empty list means it passes.

    A syntax error is the one finding (message starting with ``syntax error``): nothing else can be judged.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [StaticFinding(exc.lineno or 0, f"syntax error: {exc.msg}")]
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        return [StaticFinding(0, f"syntax error: the source cannot be parsed ({type(exc).__name__})")]
    linter = _Lint()
    try:
        linter.visit(tree)
    except RecursionError:
        linter.refuse(0, "the source is nested too deeply to check")
    unique = {(f.line, f.message): f for f in linter.findings}
    return sorted(unique.values(), key=lambda f: f.line)


def is_syntax_error(findings: list[StaticFinding]) -> bool:
    return len(findings) == 1 and findings[0].message.startswith("syntax error")


def summary(findings: list[StaticFinding]) -> tuple[str, str]:
    """(figure, message) for the gate's static row: a syntax error is called one, never 'forbidden constructs'."""
    if not findings:
        return f"no forbidden constructs ({FIRST_FILTER_NOTE})", ""
    if is_syntax_error(findings):
        return f"syntax error at line {findings[0].line}", f"line {findings[0].line}: {findings[0].message}"
    message = "; ".join(f"line {f.line}: {f.message}" for f in findings[:5])
    if len(findings) > 5:
        message += f"; and {len(findings) - 5} more"
    return f"{len(findings)} forbidden construct{'s' if len(findings) != 1 else ''}", message


# --- module knowledge (host-side imports of trusted stdlib/SDK/kit modules, cached) -------------------


def _module_allowed(name: str) -> bool:
    if name in ALLOWED_MODULES or name in SDK_ALIASES:
        return True
    return name.startswith(KITS_PACKAGE + ".") and _kit_exists(name)


def _canonical(name: str) -> str:
    return SDK_ALIASES.get(name, name)


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
    """The module object, imported on the host (only allow-listed stdlib, SDK and kit modules get here)."""
    try:
        return importlib.import_module(_canonical(name))
    except Exception:  # noqa: BLE001 - an unimportable kit: its attributes are unknown
        return None


def _attribute(module: str, attr: str) -> object:
    mod = _module(module)
    return getattr(mod, attr, None) if mod is not None and not attr.startswith("_") else None


def _module_name_of(value: object) -> str | None:
    return value.__name__ if isinstance(value, types.ModuleType) else None


# --- the lint -----------------------------------------------------------------------------------------


class _Lint(ast.NodeVisitor):
    def __init__(self) -> None:
        self.findings: list[StaticFinding] = []
        self.modules: dict[str, str] = {}  # local name -> module it is bound to
        self.aliases: set[str] = set()  # names assigned from something taken out of a module
        self.clock_roots: set[str] = set()  # names that hold datetime's classes (datetime, date...)
        self.in_attribute: set[int] = set()  # ids of Name nodes that are the base of an attribute

    def refuse(self, line: int, message: str) -> None:
        self.findings.append(StaticFinding(line, message))

    # -- names -----------------------------------------------------------------------------------------
    def _name(self, name: str | None, line: int, what: str = "name") -> None:
        if name is None or name == "_":
            return
        if name.startswith("_"):
            self.refuse(line, f"{what} {name!r} starts with '_' (private and dunder names are not allowed)")
        elif name in FORBIDDEN_NAMES:
            self.refuse(line, f"{what} {name!r} is not allowed (no reflection, code evaluation, files or ids)")

    def visit_Name(self, node: ast.Name) -> None:
        self._name(node.id, node.lineno)
        if node.id in self.modules:
            if not isinstance(node.ctx, ast.Load):
                self.refuse(node.lineno, f"rebinding the module name {node.id!r} is not allowed")
            elif id(node) not in self.in_attribute:
                self.refuse(node.lineno, f"module {self.modules[node.id]!r} may only be used as '{node.id}.<attribute>'")

    def visit_arg(self, node: ast.arg) -> None:
        self._name(node.arg, node.lineno, "argument")
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        self._name(node.arg, getattr(node, "lineno", 0), "keyword argument")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name not in ALLOWED_DUNDER_DEFINITIONS:
            self._name(node.name, node.lineno, "function")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._name(node.name, node.lineno, "class")
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        self._name(node.name, node.lineno)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> None:
        for name in node.names:
            self._name(name, node.lineno)

    visit_Nonlocal = visit_Global  # type: ignore[assignment]

    # -- match patterns: class keyword patterns are attribute names -------------------------------------
    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        for attr in node.kwd_attrs:
            self._attribute_name(attr, node.lineno, "match pattern attribute")
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        self._name(node.name, node.lineno)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        self._name(node.name, node.lineno)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        self._name(node.rest, node.lineno)
        self.generic_visit(node)

    # -- imports ---------------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            name = alias.name
            root = name.split(".")[0]
            if root == "time":
                self.refuse(node.lineno, "import of 'time' is not allowed (no clock reads: scenario times come from self.rng(seed))")
            elif not _module_allowed(name):
                self.refuse(node.lineno, f"import of {name!r} is not allowed (allowed: the SDK, kits and pure stdlib modules by full name)")
            elif alias.asname:
                self._name(alias.asname, node.lineno, "import alias")
                self.modules[alias.asname] = _canonical(name)
            elif "." in name and not _module_allowed(root):
                parent, _, leaf = name.rpartition(".")
                self.refuse(node.lineno, f"'import {name}' binds {root!r}, which is not an allowed module: write 'from {parent} import {leaf}'")
            else:
                self.modules[root] = root

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.refuse(node.lineno, "relative imports are not allowed")
        elif module in ("trace_env", "env_registry"):
            for alias in node.names:
                full = f"{module}.{alias.name}"
                if full in SDK_ALIASES or full == KITS_PACKAGE:
                    self._bind(alias, _canonical(full), node.lineno)
                else:
                    only = "'sdk' and kits" if module == "trace_env" else "'sdk'"
                    self.refuse(node.lineno, f"from {module} only {only} may be imported, not {alias.name!r}")
        elif module.split(".")[0] == "time":
            self.refuse(node.lineno, "import from 'time' is not allowed (no clock reads: scenario times come from self.rng(seed))")
        elif module == KITS_PACKAGE:
            for alias in node.names:
                if _module_allowed(f"{KITS_PACKAGE}.{alias.name}"):
                    self._bind(alias, f"{KITS_PACKAGE}.{alias.name}", node.lineno)
                else:
                    self.refuse(node.lineno, f"unknown kit {alias.name!r}: there is no module {KITS_PACKAGE}.{alias.name}")
        elif not _module_allowed(module):
            self.refuse(node.lineno, f"import from {module!r} is not allowed (allowed: the SDK, kits and pure stdlib modules by full name)")
        elif module != "__future__":
            self._import_names(node, _canonical(module))

    def _import_names(self, node: ast.ImportFrom, module: str) -> None:
        for alias in node.names:
            if alias.name == "*":
                self.refuse(node.lineno, f"'from {module} import *' is not allowed: import the names you use")
                continue
            self._name(alias.name, node.lineno, "imported name")
            if alias.asname:
                self._name(alias.asname, node.lineno, "import alias")
            sub = self._module_attribute(module, alias.name, node.lineno)
            if sub is not None:
                self._bind(alias, sub, node.lineno)
            elif alias.name in CLOCK_ATTRIBUTES:
                self.refuse(node.lineno, f"importing {alias.name!r} is a clock read: scenario times come from self.rng(seed)")
            elif module == "datetime":
                self.clock_roots.add(alias.asname or alias.name)

    def _bind(self, alias: ast.alias, module: str, line: int) -> None:
        if not _module_allowed(module):
            self.refuse(line, f"{alias.name!r} is the module {module!r}, which is not allowed")
            return
        local = alias.asname or alias.name
        self._name(local, line, "import alias")
        self.modules[local] = module

    # -- attributes ------------------------------------------------------------------------------------
    def _attribute_name(self, attr: str, line: int, what: str = "attribute") -> None:
        if attr.startswith("_"):
            self.refuse(line, f"{what} {attr!r} starts with '_' (private and dunder attributes are not allowed)")
        elif attr in INTROSPECTION_ATTRIBUTES:
            self.refuse(line, f"{what} {attr!r} is introspection (frames, code, class hierarchy) and not allowed")
        elif attr in FORBIDDEN_ATTRIBUTES:
            self.refuse(line, f"{what} {attr!r} is not allowed (no reflection or code evaluation)")

    def _module_attribute(self, module: str, attr: str, line: int) -> str | None:
        """Check ``module.attr``; returns the module it names when it is one (and an allowed one)."""
        if attr in FORBIDDEN_MODULE_ATTRIBUTES.get(module, ()):
            self.refuse(line, f"{module}.{attr} is not allowed (reflection by name, code evaluation or shared state)")
            return None
        sub = _module_name_of(_attribute(module, attr))
        if sub is not None and not _module_allowed(sub):
            self.refuse(line, f"{module}.{attr} is the module {sub!r}, which is not allowed")
            return None
        return sub

    def _root(self, node: ast.AST) -> ast.Name | None:
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return node if isinstance(node, ast.Name) else None

    def _from_module(self, node: ast.AST) -> bool:
        root = self._root(node)
        return root is not None and (root.id in self.modules or root.id in self.aliases)

    def _clock_root(self, node: ast.AST) -> bool:
        root = self._root(node)
        return root is not None and (
            self.modules.get(root.id) == "datetime" or root.id in self.clock_roots or root.id in self.aliases
        )

    def visit_Attribute(self, node: ast.Attribute) -> None:
        line, attr = node.lineno, node.attr
        if not (attr in ALLOWED_DUNDER_DEFINITIONS and _is_super_call(node.value)):
            self._attribute_name(attr, line)
        if attr in CLOCK_ATTRIBUTES and self._clock_root(node.value):
            self.refuse(line, f"datetime's .{attr} is a clock read (or a conversion from one): scenario times come from self.rng(seed)")
        if attr in ("format", "format_map") and isinstance(node.value, ast.Constant):
            self._format_template(node.value, line)
        if not isinstance(node.ctx, ast.Load) and self._from_module(node.value):
            self.refuse(line, f"assigning to .{attr} of a module (or of something taken from one) is not allowed")
        module = self._resolve(node.value)
        if module is not None:
            self._module_attribute(module, attr, line)
        if isinstance(node.value, ast.Name):
            self.in_attribute.add(id(node.value))
        self.generic_visit(node)

    def _resolve(self, node: ast.AST) -> str | None:
        """The module an expression names (``json``, ``sdk``, ``calendar.datetime``...), or None."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value)
            return _module_name_of(_attribute(base, node.attr)) if base is not None else None
        return None

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if not isinstance(node.ctx, ast.Load) and self._from_module(node):
            self.refuse(node.lineno, "assigning to an item of module state is not allowed")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in MUTATING_METHODS and self._from_module(func.value):
                self.refuse(node.lineno, f".{func.attr}() on module state is not allowed (it would change the SDK or a kit for everyone)")
            if func.attr in ("now", "today", "utcnow") and not self._clock_root(func.value):
                self.refuse(node.lineno, f".{func.attr}() reads the clock: scenario times come from self.rng(seed)")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._track_alias(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._track_alias([node.target], node.value)
        self.generic_visit(node)

    def _track_alias(self, targets: list[ast.expr], value: ast.expr) -> None:
        if isinstance(value, (ast.Attribute, ast.Subscript)) and self._from_module(value):
            self.aliases.update(t.id for t in targets if isinstance(t, ast.Name))

    # -- strings ---------------------------------------------------------------------------------------
    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring or bare string statement is inert
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        if isinstance(text, str) and _DUNDERISH.search(text):
            self.refuse(node.lineno, f"string {_short(text)} looks like a dunder name ('__'), which is not allowed")

    def _format_template(self, template: ast.Constant, line: int) -> None:
        """A literal template's fields may not read private or introspection attributes. (A computed
        template can only render text, never hand back an object, so it is left to the sandbox.)"""
        if not isinstance(template.value, str):
            return
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(template.value) if f]
        except ValueError:
            self.refuse(line, f"malformed format template {_short(template.value)}")
            return
        for field in fields:
            for part in re.split(r"[.\[\]]", field)[1:]:
                if part and (part.startswith("_") or part in INTROSPECTION_ATTRIBUTES):
                    self.refuse(line, f"format field {field!r} reads {part!r}, which is not allowed")


def _is_super_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")
