"""Every import arrow points down, and no two files import each other (directly or round a loop).

Read from the syntax tree of every module of every package, so lazy imports inside functions and imports under
``TYPE_CHECKING`` count like the ones at the top: an arrow is an arrow whenever it runs. An import statement
points at the module it names: ``from pkg import sub`` at ``pkg/sub.py`` when ``sub`` is a module, else at
``pkg/__init__.py``. Names turned into imports at run time (``importlib``, Gymnasium entry points) are not seen.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

LAYERS: list[tuple[str, ...]] = [
    ("trace_env",),  # the guest side: runs inside the sandbox, imports nothing of ours
    ("schemas",),
    ("sandbox", "llm_clients"),
    ("env_registry", "fuzz"),
    ("trainer", "router"),
    ("factory", "integrations"),
]
"""Lowest first. A module may import its own package and the packages of lower layers, nothing else."""

LAYER = {package: depth for depth, packages in enumerate(LAYERS) for package in packages}
NOT_PACKAGES = {"tests", "bench", "examples", "scripts"}


def modules(root: Path = REPO) -> dict[str, Path]:
    """Dotted module name -> file, for every package of the project (a folder with ``__init__.py``)."""
    found = {}
    for init in sorted(root.glob("*/__init__.py")):
        package = init.parent.name
        if package in NOT_PACKAGES or package.startswith("."):
            continue
        for path in sorted(init.parent.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules that ``name`` imports, anywhere in its file."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        named: list[str] = []
        if isinstance(node, ast.Import):
            named = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            named = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        for target in named:
            while target and target not in known:  # `import a.b.c` of a name inside a module: the module
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
    return targets


@cache
def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def upward(edges: dict[str, set[str]]) -> list[str]:
    """``a -> b`` for every import of another package that is not on a lower layer."""
    found = []
    for source, targets in sorted(edges.items()):
        mine = source.split(".")[0]
        for target in sorted(targets):
            theirs = target.split(".")[0]
            if theirs != mine and LAYER[theirs] >= LAYER[mine]:
                found.append(f"{source} -> {target}")
    return found


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that reach each other through imports (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_every_package_has_a_layer() -> None:
    packages = {name.split(".")[0] for name in graph()}
    assert packages == set(LAYER), f"place new packages in LAYERS: {sorted(packages - set(LAYER))}"


def test_every_import_points_down() -> None:
    assert upward(graph()) == []


def test_no_import_circles_between_files() -> None:
    assert circles(graph()) == []


def test_the_guest_side_imports_nothing_of_ours() -> None:
    outside = sorted(f"{s} -> {t}" for s, ts in graph().items() if s.startswith("trace_env") for t in ts if not t.startswith("trace_env"))
    assert outside == []


@pytest.mark.parametrize(
    "source, expect_upward, expect_circle",
    [
        ("from factory.errors import FactoryError\n", True, False),  # a lower package importing a higher one
        ("def later():\n    from router.decide import Router\n", True, False),  # lazily: counts the same
        ("from . import b\n", False, True),  # a.py and b.py importing each other
    ],
)
def test_the_scan_sees_what_it_must(tmp_path: Path, source: str, expect_upward: bool, expect_circle: bool) -> None:
    """The checks above fail on the faults they exist for: the scan is run on a small tree that has them."""
    for package in ("trainer", "factory", "router"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "factory" / "errors.py").write_text("class FactoryError(Exception): ...\n")
    (tmp_path / "router" / "decide.py").write_text("class Router: ...\n")
    (tmp_path / "trainer" / "a.py").write_text(source)
    (tmp_path / "trainer" / "b.py").write_text("from trainer import a\n")
    known = modules(tmp_path)
    edges = {name: imports(name, path, known) for name, path in known.items()}
    assert bool(upward(edges)) is expect_upward
    assert bool(circles(edges)) is expect_circle
