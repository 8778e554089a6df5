"""Format templates the lint can read: ``str.format``/``format_map`` resolve ``{0.attr}`` and ``{0[key]}`` fields
with getattr/getitem at run time, so a template the lint cannot see is an attribute read by a computed name
(``("{0." + "_" * 2 + "class" ...).format(self)`` read any dunder chain before this). Host side.

The rule: a ``.format``/``.format_map`` template must be *known*, i.e. every string it can be at run time is a
literal in the file, and no field of any of those literals reads an attribute (``{0.x}``: write ``{x}`` with
``x=obj.x``, or an f-string, whose attribute reads the lint sees) or an item whose key starts with ``_``.

Known templates, so the generators' usual spellings pass: a string literal; ``<rng>.choice(C)`` or ``C[key]`` of a
known container C; ``a if cond else b`` of known templates; a name bound once in the file (nowhere else
assigned, deleted, imported or declared global) to a known template. Known containers: a list, tuple, set or
dict literal of known templates, or a name bound once to one (a list, set or dict name only where it is used in
read positions (``C[key]``, ``x.choice(C)``, ``for _ in C``, ``len(C)``, ``list(C)``, ``C.items()``...)
so nothing can add a computed template to it). ``choice`` is trusted only while the file defines no ``choice`` of
its own. ``str.format(template, ...)`` (the template as an argument) and Formatter's ``vformat``/``get_field``
are refused outright.
"""

from __future__ import annotations

import ast
import string
from dataclasses import dataclass, field

FORMAT_METHODS = frozenset({"format", "format_map"})
#: string.Formatter's entry points that take a template or a field name as data (Formatter is not allow-listed;
#: refusing the names keeps a look-alike from being reached another way).
FORMATTER_METHODS = frozenset({"vformat", "get_field"})
#: Calls that read a container without changing it (builtins, and methods on the container).
_READING_CALLS = frozenset({"len", "list", "tuple", "sorted", "set", "frozenset", "iter", "enumerate", "reversed",
                            "any", "all", "min", "max"})
_READING_METHODS = frozenset({"keys", "values", "items", "get", "index", "count", "copy"})


@dataclass
class Templates:
    """What the file binds: module-level names that hold known template containers (or templates)."""

    containers: dict[str, ast.expr] = field(default_factory=dict)
    choice_trusted: bool = True


def prepare(tree: ast.Module, parent: dict[int, ast.AST], nodes: list[ast.AST] | None = None) -> Templates:
    """Find the module-level names bound once to literal containers and used only to read them (``nodes``:
    every node of ``tree``, when the caller has walked it already)."""
    if nodes is None:
        nodes = list(ast.walk(tree))
    bindings: dict[str, int] = {}
    for node in nodes:
        for name in _bound_names(node):
            bindings[name] = bindings.get(name, 0) + 1
    found = Templates(choice_trusted="choice" not in bindings)
    candidates: dict[str, ast.expr] = {}
    for stmt in nodes:
        target = value = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            target, value = stmt.targets[0].id, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            target, value = stmt.target.id, stmt.value
        if target is not None and value is not None and bindings.get(target) == 1:
            candidates[target] = value
    loads: dict[str, list[ast.Name]] = {}  # every read of every name, found in one walk
    if candidates:
        for node in nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in candidates:
                loads.setdefault(node.id, []).append(node)
    for name, value in candidates.items():
        if isinstance(value, (ast.Constant, ast.Tuple)):  # immutable: every use is a read
            found.containers[name] = value
            continue
        if all(_reads_only(use, parent, found.choice_trusted) for use in loads.get(name, [])):
            found.containers[name] = value
    return found


def _bound_names(node: ast.AST) -> list[str]:
    """Every name a node binds or declares (assignment targets, deletions, arguments, imports, defs, globals)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return [node.id]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names) * 2  # a name declared global can be rebound anywhere: never a known container
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    if isinstance(node, ast.MatchMapping) and node.rest:
        return [node.rest]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    return []


def _reads_only(use: ast.Name, parent: dict[int, ast.AST], choice_trusted: bool) -> bool:
    up = parent.get(id(use))
    if isinstance(up, ast.Subscript) and up.value is use and isinstance(up.ctx, ast.Load):
        return True
    if isinstance(up, (ast.For, ast.AsyncFor, ast.comprehension)) and up.iter is use:
        return True
    if isinstance(up, ast.Compare) and use in up.comparators:
        return True
    if isinstance(up, ast.Attribute) and up.value is use and up.attr in _READING_METHODS:
        return True
    if isinstance(up, ast.Call) and use in up.args and len(up.args) == 1 and not up.keywords:
        func = up.func
        if isinstance(func, ast.Name) and func.id in _READING_CALLS:
            return True
        return choice_trusted and isinstance(func, ast.Attribute) and func.attr == "choice"
    return False


def literals(node: ast.expr, known: Templates, depth: int = 0) -> list[ast.Constant] | None:
    """Every literal a template expression can be at run time, or None when that is not known."""
    if depth > 32:  # names bound to each other in a cycle
        return None
    depth += 1
    if isinstance(node, ast.Constant):
        return [node] if isinstance(node.value, str) else None
    if isinstance(node, ast.IfExp):
        body, orelse = literals(node.body, known, depth), literals(node.orelse, known, depth)
        return None if body is None or orelse is None else body + orelse
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return _container(node.value, known, depth)
    if isinstance(node, ast.Call) and known.choice_trusted and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "choice" and len(node.args) == 1 and not node.keywords:
        return _container(node.args[0], known, depth)
    if isinstance(node, ast.Name) and node.id in known.containers:
        return literals(known.containers[node.id], known, depth)
    return None


def _container(node: ast.expr, known: Templates, depth: int) -> list[ast.Constant] | None:
    if isinstance(node, ast.Name) and node.id in known.containers:
        return None if depth > 32 else _container(known.containers[node.id], known, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items: list[ast.expr] = list(node.elts)
    elif isinstance(node, ast.Dict):
        items = list(node.values)
    else:
        return None
    out: list[ast.Constant] = []
    for item in items:
        found = literals(item, known, depth)
        if found is None:
            return None
        out += found
    return out


def field_problems(template: str) -> list[str]:
    """Why a literal template's fields are not allowed (attribute reads, private items), nested specs included."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        return [f"malformed format template {template[:40]!r}"]
    problems = []
    for _, name, spec, _ in parsed:
        if name is None:
            continue
        if "." in name:
            problems.append(f"format field {{{name}}} reads an attribute at run time: pass the value as an argument "
                            "({x} with x=obj.x) or use an f-string")
        for key in name.split("[")[1:]:
            if key.startswith("_"):
                problems.append(f"format field {{{name}}} reads the private item {key.rstrip(']')!r}")
        if spec and "{" in spec:
            problems += field_problems(spec)
    return problems
