"""Static check: a QUALITY FILTER for env modules, read from the syntax tree (never by running it). Host side.

It is not a security boundary, and it does not try to be one. Env code is assumed hostile and able to run
arbitrary Python in its own process (through library machinery, frames, strings turned into code: any
spelling). The wall is elsewhere: the sandbox's kernel-level limits (nothing outside the sandbox is reachable),
a fresh process for episodes, and the reward audit (``env_registry.audit``: a share of every run's episodes is
replayed on a fresh worker, and a reward that differs stops the run). So this lint refuses no valid Python for
security reasons (a three-argument ``type()``, ``getattr``, a ``.format()`` template chosen at run time all
pass). It exists to give whoever writes an env (an LLM, mostly) early feedback, with a line number and the fix,
on what would fail later anyway:

- a syntax error;
- an import outside the allowed set (the SDK, the kits and pure-computation stdlib modules: :data:`ALLOWED_MODULES`),
  with what to use instead for the usual ones (``time``, ``os``, ``uuid``, ``secrets``...);
- obvious nondeterminism, which the gate's determinism checks and the audit would reject: the clock
  (``datetime.now()``...), the process-wide random generator (``random.choice(...)``, ``random.Random()``
  without a seed), ``hash()`` (string hashes change with every worker's ``PYTHONHASHSEED``), ``id()``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from factory.validation.static_allowlist import KITS_PACKAGE, MISSING, SDK_ALIASES, STDLIB, module_allowed, value_of

#: Pure stdlib modules an env may import, by full dotted name (the prompts list them).
ALLOWED_MODULES = frozenset(STDLIB)
RULE = ("a quality filter: the env module must parse, import only the SDK, its kits and the allowed pure stdlib "
        "modules, and draw nothing from the clock, the process-wide random generator, hash() or id()")
FILTER_NOTE = "a quality filter; the sandbox, a fresh process and the reward audit are the wall"
FIRST_FILTER_NOTE = FILTER_NOTE  # the name of earlier releases

#: Calls that read the clock, on anything: scenario times come from ``self.rng(seed)``.
CLOCK_CALLS = frozenset({"now", "today", "utcnow"})
#: What to use instead of a module that is not allowed, for the modules writers reach for.
INSTEAD = {
    "time": "no clock reads: scenario times come from self.rng(seed), e.g. a fixed base date plus a drawn timedelta",
    "os": "env code has no files, processes or environment; os.urandom is random: draw from self.rng(seed)",
    "uuid": "uuid4() is random: derive ids from self.rng(seed), e.g. ''.join(rng.choice(ALPHABET) for _ in range(8))",
    "secrets": "secrets is random: draw from self.rng(seed)",
    "sys": "env code reads nothing of the interpreter; keep state in the scenario",
    "subprocess": "env code runs no processes: model the world in the scenario's state",
    "socket": "env code has no network: model the service in the scenario's state",
    "threading": "env code is single-threaded: play the world step by step",
    "pathlib": "env code has no files: keep data in the module or the scenario's state",
    "io": "env code has no files: keep data in the module or the scenario's state",
}
_ALLOWED_LIST = "the SDK (from trace_env import sdk), trace_env.kits.<kit>, and " + " ".join(sorted(ALLOWED_MODULES))


@dataclass
class StaticFinding:
    line: int
    message: str


def check_source(source: str) -> list[StaticFinding]:
    """Every problem the filter finds, with line numbers; an empty list means it passes.

    A syntax error is the one finding (message starting with ``syntax error``): nothing else can be judged.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [StaticFinding(exc.lineno or 0, f"syntax error: {exc.msg}")]
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        return [StaticFinding(0, f"syntax error: the source cannot be parsed ({type(exc).__name__})")]
    linter = _Filter()
    try:
        linter.visit(tree)
    except RecursionError:
        linter.refuse(0, "the source is nested too deeply to check; split deep expressions into functions")
    unique = {(f.line, f.message): f for f in linter.findings}
    return sorted(unique.values(), key=lambda f: f.line)


def is_syntax_error(findings: list[StaticFinding]) -> bool:
    return len(findings) == 1 and findings[0].message.startswith("syntax error")


def summary(findings: list[StaticFinding]) -> tuple[str, str]:
    """(figure, message) for the gate's static row."""
    if not findings:
        return f"no problems found ({FILTER_NOTE})", ""
    if is_syntax_error(findings):
        return f"syntax error at line {findings[0].line}", f"line {findings[0].line}: {findings[0].message}"
    message = "; ".join(f"line {f.line}: {f.message}" for f in findings[:5])
    if len(findings) > 5:
        message += f"; and {len(findings) - 5} more"
    return f"{len(findings)} problem{'s' if len(findings) != 1 else ''}", message


def _not_allowed(name: str) -> str:
    root = name.split(".")[0]
    why = INSTEAD.get(root)
    return (f"import of {name!r} is not allowed ({why})" if why else
            f"import of {name!r} is not allowed: the sandbox gives env code {_ALLOWED_LIST}")


class _Filter(ast.NodeVisitor):
    def __init__(self) -> None:
        self.findings: list[StaticFinding] = []
        self.random_modules: set[str] = set()  # names bound to the random module
        self.random_functions: dict[str, str] = {}  # names bound to random.<function> (the shared generator)

    def refuse(self, line: int, message: str) -> None:
        self.findings.append(StaticFinding(line, message))

    # -- imports ---------------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not module_allowed(alias.name):
                self.refuse(node.lineno, _not_allowed(alias.name))
            elif alias.name == "random":
                self.random_modules.add(alias.asname or "random")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.refuse(node.lineno, "relative imports do not work in an env module (it is loaded alone): import the SDK "
                                     "and kits by full name, e.g. from trace_env import sdk")
            return
        if module in ("trace_env", "env_registry"):
            for alias in node.names:
                if f"{module}.{alias.name}" not in SDK_ALIASES and f"{module}.{alias.name}" != KITS_PACKAGE:
                    self.refuse(node.lineno, f"from {module} only 'sdk' and 'kits' can be imported, not {alias.name!r}")
            return
        if module != KITS_PACKAGE and not module_allowed(module):
            self.refuse(node.lineno, _not_allowed(module))
            return
        for alias in node.names:
            if alias.name == "*":
                continue
            if module == KITS_PACKAGE:
                if not module_allowed(f"{KITS_PACKAGE}.{alias.name}"):
                    self.refuse(node.lineno, f"unknown kit {alias.name!r}: there is no module {KITS_PACKAGE}.{alias.name}")
            elif value_of(module, alias.name) is MISSING:
                self.refuse(node.lineno, f"{module} has no {alias.name!r}")
            elif module == "random" and alias.name not in ("Random",):
                self.refuse(node.lineno, f"random.{alias.name} draws from the process-wide generator, which differs per "
                                         "process: draw from rng = self.rng(seed) instead (rng.choice, rng.randint, rng.random...)")

    # -- nondeterminism ----------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in CLOCK_CALLS:
                self.refuse(node.lineno, f".{func.attr}() reads the clock, so the scenario changes from run to run: "
                                         "build times from self.rng(seed) (e.g. a fixed base date plus a drawn timedelta)")
            if isinstance(func.value, ast.Name) and func.value.id in self.random_modules:
                if func.attr == "Random":
                    if not node.args and not node.keywords:
                        self.refuse(node.lineno, "random.Random() without a seed is seeded from the OS: use self.rng(seed)")
                else:
                    self.refuse(node.lineno, f"random.{func.attr}() draws from the process-wide generator, which differs "
                                             f"per process: use rng = self.rng(seed) and rng.{func.attr}(...)")
        elif isinstance(func, ast.Name):
            if func.id == "hash":
                self.refuse(node.lineno, "hash() of a str or bytes changes with each worker's PYTHONHASHSEED: use a stable "
                                         "key (the value itself, or hashlib.sha256(text.encode()).hexdigest())")
            elif func.id == "id":
                self.refuse(node.lineno, "id() is a memory address and changes from run to run: use a value the "
                                         "scenario holds")
            elif func.id == "__import__":
                self.refuse(node.lineno, "__import__() imports outside the allowed set's view: use an import statement "
                                         f"of {_ALLOWED_LIST}")
        self.generic_visit(node)
