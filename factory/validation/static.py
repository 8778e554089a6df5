"""Static check: what an env module may import and call, decided from its syntax tree (never by running it).

The rules are an allow-list: pure stdlib modules that cannot touch files, processes, the network or the
clock, plus the SDK. Escape hatches are refused in any spelling: the dangerous builtins by name, any use of
``__builtins__``, dunder attribute access (``().__class__.__base__.__subclasses__()``), and ``getattr`` with a
computed or dunder attribute name (``getattr(__builtins__, "ev" + "al")``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

ALLOWED_MODULES = frozenset(
    {
        "__future__", "bisect", "calendar", "collections", "copy", "dataclasses", "datetime", "decimal", "enum",
        "fractions", "functools", "hashlib", "heapq", "itertools", "json", "math", "operator", "random", "re",
        "statistics", "string", "textwrap", "typing", "abc", "numbers",
    }
)
SDK_MODULES = frozenset({"env_registry", "env_registry.sdk", "trace_env", "trace_env.sdk"})
FORBIDDEN_NAMES = frozenset(
    {
        "eval", "exec", "compile", "open", "__import__", "globals", "locals", "vars", "breakpoint", "input",
        "memoryview", "__builtins__", "__loader__", "__spec__", "exit", "quit", "help", "setattr", "delattr",
    }
)
ALLOWED_DUNDER_ATTRIBUTES = frozenset({"__init__", "__post_init__", "__name__"})


@dataclass
class StaticFinding:
    line: int
    message: str


def check_source(source: str) -> list[StaticFinding]:
    """Every rule the source breaks, with line numbers; an empty list means it passes."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [StaticFinding(exc.lineno or 0, f"syntax error: {exc.msg}")]
    findings: list[StaticFinding] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _module_allowed(alias.name):
                    findings.append(StaticFinding(line, f"import of {alias.name!r} is not allowed"))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                findings.append(StaticFinding(line, "relative imports are not allowed"))
            elif module in ("env_registry", "trace_env"):
                if any(alias.name not in ("sdk", "kits") or (module, alias.name) == ("env_registry", "kits") for alias in node.names):
                    findings.append(StaticFinding(line, f"from {module} only 'sdk'{' and kits' if module == 'trace_env' else ''} may be imported"))
            elif not _module_allowed(module):
                findings.append(StaticFinding(line, f"import from {module!r} is not allowed"))
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            findings.append(StaticFinding(line, f"use of {node.id!r} is not allowed"))
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in ALLOWED_DUNDER_ATTRIBUTES:
                findings.append(StaticFinding(line, f"access to dunder attribute {node.attr!r} is not allowed"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"getattr", "hasattr"}:
            name = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                findings.append(StaticFinding(line, f"{node.func.id} with a computed attribute name is not allowed"))
            elif name.value.startswith("__"):
                findings.append(StaticFinding(line, f"{node.func.id} of dunder attribute {name.value!r} is not allowed"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in {"__builtins__", "__import__", "__subclasses__", "__globals__", "__code__"}:
                findings.append(StaticFinding(line, f"string {node.value!r} is not allowed"))
    return sorted(findings, key=lambda f: f.line)


def _module_allowed(name: str) -> bool:
    return name in SDK_MODULES or name.startswith("trace_env.kits") or name.split(".")[0] in ALLOWED_MODULES
