"""Static check: a lint of an env module's syntax tree (never by running it), closed by construction. Host side.

It is a FIRST FILTER, not the security boundary: the sandbox is. It exists to give whoever wrote the env (an
LLM, mostly) early, clear feedback, with a line number, and to keep what runs plain, deterministic Python the
gate's checks can reason about. The rule, in one sentence (:data:`RULE`):

    Env code may use only its own names, allow-listed builtins and allow-listed (module, attribute) pairs
    written out as ``module.attribute``; no name or attribute may start with ``_`` or be one of the
    interpreter's frame, code or generator attributes; a module may appear only in front of one of its allowed
    attributes and a class factory only in ``isinstance``, called with one argument, as ``metaclass=`` (a
    metaclass) or as the base of an enum that has members (an enum); and no string is ever turned into a name
    or code.

Why that closes each way around it the red team found, rather than naming them one by one:

- a module reaches no other position (assignment, argument, default, container, walrus, loop or match target,
  ``with``, return, lambda...): where an expression is a module is known from imports alone, so a module
  value never flows and every attribute read from one is checked against the allowlist;
- attributes are never read by computed names: ``getattr`` and friends are not allowed builtins, and the
  stdlib entries that take attribute names or evaluate strings (``operator.attrgetter``, ``functools.wraps``,
  ``singledispatch``, ``typing.get_type_hints``, ``string.Formatter``...) are not on the allowlist
  (:mod:`factory.validation.static_allowlist` holds the lists and says what is left out and why); a name may
  not be a frame, code or generator attribute either, since names become attribute names (a dataclass's
  fields are its ``__match_args__``, which a class pattern reads off any subject its class claims);
- no class is built from a computed dict: ``type`` is not an allowed builtin, ``make_dataclass`` and
  ``typing.get_origin`` (``get_origin(typing.Type)`` is ``type``) are not allow-listed, and the remaining class
  factories (metaclasses and enum classes, whose call with a name and a dict is the functional API) keep to
  the positions above, found from the modules themselves and from the file's own class statements. A factory
  never reaches a name the lint does not see: a metaclass is never a base (a subclass would be a factory whose
  classmethods, decorators or enum members hand it on), and an enum the file defines has members, so it is
  no factory at all (an enum with members cannot be extended or called with a dict).

- no attribute is read through a string at run time either: a ``.format``/``.format_map`` template must be
  one the lint can read (literals, or a choice among literals: :mod:`factory.validation.static_format`) and its
  fields read no attributes; the functional forms of ``typing.NamedTuple``/``TypedDict`` and
  ``collections.namedtuple`` (strings turned into field names) may appear only as a base class.

Besides the rule: no string constant spells a dunder, module state is not assigned to, and the clock is not read
(scenario times come from ``self.rng(seed)``).
"""

from __future__ import annotations

import ast
import re
import types
from dataclasses import dataclass

from factory.validation import static_format
from factory.validation.static_allowlist import (
    FORBIDDEN_BUILTINS, INTERNAL_ATTRIBUTES, KITS_PACKAGE, MISSING, REFLECTION_ATTRIBUTES, SDK_ALIASES, STDLIB,
    STRING_CLASS_BUILDERS, canonical, is_factory, module_allowed, pair_allowed, value_of,
)
from factory.validation.static_positions import Positions

RULE = ("env code may use only its own names, allow-listed builtins and allow-listed (module, attribute) pairs "
        "written as module.attribute; no name or attribute may start with '_' or be an interpreter frame, code or "
        "generator attribute; a module may appear only in front of an allowed attribute and a class factory only "
        "in isinstance, called with one argument, as metaclass= (a metaclass) or as the base of an enum with "
        "members (an enum); no string is ever turned into a name or code")
#: Pure stdlib modules an env may import, by full dotted name (the prompts list them).
ALLOWED_MODULES = frozenset(STDLIB)
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
    """Every place the source breaks the rule, with line numbers; an empty list means it passes.

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
        linter.prepare(tree)
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


# --- the lint -----------------------------------------------------------------------------------------


class _Lint(Positions, ast.NodeVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.findings: list[StaticFinding] = []
        self.aliases: set[str] = set()  # names assigned from something taken out of a module

    def refuse(self, line: int, message: str) -> None:
        self.findings.append(StaticFinding(line, message))

    # -- names -----------------------------------------------------------------------------------------
    def _name(self, name: str | None, line: int, what: str = "name") -> None:
        if name is None or name == "_":
            return
        if name.startswith("_"):
            self.refuse(line, f"{what} {name!r} starts with '_' (private and dunder names are not allowed)")
        elif name in INTERNAL_ATTRIBUTES:
            self.refuse(line, f"{what} {name!r} is the name of an interpreter frame, code or generator attribute (a "
                              "name can become an attribute name: dataclass fields, class patterns, keywords)")
        elif name in FORBIDDEN_BUILTINS:
            self.refuse(line, f"{what} {name!r} is not an allowed builtin (no reflection, code evaluation, files, "
                              "ids or classes built with type())")
        elif name in self.modules:
            self.refuse(line, f"{what} {name!r} rebinds the module {self.modules[name]!r}, which is not allowed")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.modules:
            if isinstance(node.ctx, ast.Load):
                self._module_position(node, node.id)
            else:
                self.refuse(node.lineno, f"rebinding the module name {node.id!r} is not allowed")
            return
        self._name(node.id, node.lineno)
        if node.id in self.factories and isinstance(node.ctx, ast.Load):
            self._factory_position(node, node.id)
        if node.id in self.string_builders and isinstance(node.ctx, ast.Load):
            self._string_builder_position(node, node.id)

    def visit_arg(self, node: ast.arg) -> None:
        self._name(node.arg, node.lineno, "argument")
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg is not None and node.arg.startswith("_"):
            self.refuse(getattr(node, "lineno", 0), f"keyword argument {node.arg!r} starts with '_'")
        elif node.arg in INTERNAL_ATTRIBUTES:
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

    def visit_alias(self, node: ast.alias) -> None:
        pass  # checked with their import

    # -- match patterns: class keyword patterns are attribute names, captures are names ------------------------
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
            name, root = alias.name, alias.name.split(".")[0]
            if root == "time":
                self.refuse(node.lineno, "import of 'time' is not allowed (no clock reads: scenario times come from self.rng(seed))")
            elif not module_allowed(name):
                self.refuse(node.lineno, f"import of {name!r} is not allowed (allowed: the SDK, kits and pure stdlib modules by full name)")
            elif alias.asname:
                if alias.asname.startswith("_") or alias.asname in FORBIDDEN_BUILTINS or alias.asname in INTERNAL_ATTRIBUTES:
                    self.refuse(node.lineno, f"import alias {alias.asname!r} is not allowed (private name, a builtin's or an "
                                             "interpreter attribute's)")
            elif "." in name and not module_allowed(root):
                parent, _, leaf = name.rpartition(".")
                self.refuse(node.lineno, f"'import {name}' binds {root!r}, which is not an allowed module: write 'from {parent} import {leaf}'")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.refuse(node.lineno, "relative imports are not allowed")
            return
        if module.split(".")[0] == "time":
            self.refuse(node.lineno, "import from 'time' is not allowed (no clock reads: scenario times come from self.rng(seed))")
            return
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if alias.name == "*":
                self.refuse(node.lineno, f"'from {module} import *' is not allowed: import the names you use")
                continue
            if alias.name.startswith("_") or (alias.asname or "").startswith("_"):
                self.refuse(node.lineno, f"imported name {alias.asname or alias.name!r} starts with '_' (private names are not allowed)")
                continue
            if module in ("trace_env", "env_registry"):
                if full not in SDK_ALIASES and full != KITS_PACKAGE:
                    only = "'sdk' and kits" if module == "trace_env" else "'sdk'"
                    self.refuse(node.lineno, f"from {module} only {only} may be imported, not {alias.name!r}")
            elif module == KITS_PACKAGE and not module_allowed(full):
                self.refuse(node.lineno, f"unknown kit {alias.name!r}: there is no module {KITS_PACKAGE}.{alias.name}")
            elif module != KITS_PACKAGE and not module_allowed(module):
                self.refuse(node.lineno, f"import from {module!r} is not allowed (allowed: the SDK, kits and pure stdlib modules by full name)")
                return
            elif module != KITS_PACKAGE and not pair_allowed(module, alias.name):
                self._not_allowed(node.lineno, canonical(module), alias.name)
            elif alias.name in CLOCK_ATTRIBUTES:
                self.refuse(node.lineno, f"importing {alias.name!r} is a clock read: scenario times come from self.rng(seed)")
            if alias.asname in FORBIDDEN_BUILTINS or alias.asname in INTERNAL_ATTRIBUTES:
                self._name(alias.asname, node.lineno, "import alias")

    def _not_allowed(self, line: int, module: str, attr: str) -> None:
        value = value_of(module, attr)
        why = (f"the module {value.__name__!r}, which is not allowed" if isinstance(value, types.ModuleType)
               else "not on the allowlist" if value is not MISSING else "not a public name of that module")
        hint = " (use self.rng(seed): the process-wide generator is shared)" if module == "random" else ""
        self.refuse(line, f"{module}.{attr} is {why}{hint}")

    # -- attributes ------------------------------------------------------------------------------------
    def _attribute_name(self, attr: str, line: int, what: str = "attribute") -> None:
        if attr.startswith("_"):
            self.refuse(line, f"{what} {attr!r} starts with '_' (private and dunder attributes are not allowed)")
        elif attr in INTERNAL_ATTRIBUTES:
            self.refuse(line, f"{what} {attr!r} belongs to the interpreter's frames, code or generators and is not allowed")
        elif attr in REFLECTION_ATTRIBUTES:
            self.refuse(line, f"{what} {attr!r} is not allowed (no reflection or code evaluation)")

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
        module = self._resolve(node.value)
        if module is not None and not attr.startswith("_"):
            if not pair_allowed(module, attr):
                self._not_allowed(line, module, attr)
            elif self._resolve(node) is not None:
                self._module_position(node, f"{module}.{attr}")
            elif (module, attr) in STRING_CLASS_BUILDERS and isinstance(node.ctx, ast.Load):
                self._string_builder_position(node, f"{module}.{attr}")
            elif is_factory(value_of(module, attr)) and isinstance(node.ctx, ast.Load):
                self._factory_position(node, f"{module}.{attr}")
        if not (attr in ALLOWED_DUNDER_DEFINITIONS and _is_super_call(node.value)):
            self._attribute_name(attr, line)
        if attr in CLOCK_ATTRIBUTES and self._clock_root(node.value):
            self.refuse(line, f"datetime's .{attr} is a clock read (or a conversion from one): scenario times come from self.rng(seed)")
        if attr in static_format.FORMAT_METHODS:
            self._format_template(node, line)
        elif attr in static_format.FORMATTER_METHODS:
            self.refuse(line, f".{attr}() takes a format template or field name as data, which reads attributes by "
                              "name at run time: use a literal template's .format()")
        if not isinstance(node.ctx, ast.Load) and self._from_module(node.value):
            self.refuse(line, f"assigning to .{attr} of a module (or of something taken from one) is not allowed")
        if isinstance(node.value, ast.Name) and node.value.id in self.modules:
            return  # the module name itself is in its one allowed position
        self.generic_visit(node)

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

    def _format_template(self, node: ast.Attribute, line: int) -> None:
        """str.format resolves fields with getattr at run time: the template must be one the lint can read
        (:mod:`factory.validation.static_format`), and its fields may not read attributes or private items."""
        if isinstance(node.value, ast.Name) and node.value.id == "str":
            self.refuse(line, f"str.{node.attr}(template, ...) takes the template as data: call .{node.attr}() on a "
                              "literal template")
            return
        found = static_format.literals(node.value, self.templates)
        if found is None:
            self.refuse(line, f".{node.attr}() needs a template the lint can read (a string literal, or a choice or "
                              "item of a literal list/tuple/dict): a computed template reads attributes by name at run time")
            return
        for literal in found:
            for problem in static_format.field_problems(literal.value):
                self.refuse(line, problem)


def _is_super_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")
