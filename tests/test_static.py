"""The static check is a quality filter (issue 32): it reports syntax errors, imports outside the allowed set and
obvious nondeterminism on their lines, with a message that teaches the fix, and refuses no valid Python for
security reasons. The spellings the old security lint refused now pass it; what holds against them is the wall:
code they run inside a sandbox reaches nothing of the host (tested here on a real bwrap sandbox), and rewards
that depend on more than seed and actions are caught by the reward audit (tests/trainer/test_audit.py).

Each case is a snippet placed after a fixed header, so the expected line is known."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from factory.validation.static import check_source, is_syntax_error, summary

HEADER = "from trace_env import sdk\nimport json\nimport random\nimport operator\nimport string\nimport copy\nimport datetime\n"
FIRST_LINE = HEADER.count("\n") + 1
ROOT = Path(__file__).resolve().parents[1]

# (snippet, words the message must hold: what is wrong and the fix)
REFUSED: dict[str, list[tuple[str, str]]] = {
    "imports outside the allowed set": [
        ("import time", "self.rng(seed)"),
        ("from time import monotonic", "self.rng(seed)"),
        ("import os", "os.urandom is random"),
        ("import uuid", "derive ids from self.rng(seed)"),
        ("import secrets", "self.rng(seed)"),
        ("import sys", "not allowed"),
        ("import subprocess", "runs no processes"),
        ("import xml.etree.ElementTree as et", "the SDK (from trace_env import sdk)"),
        ("from . import x", "relative imports"),
        ("from trace_env import handler", "only 'sdk' and 'kits'"),
        ("from trace_env.kits import nowhere", "unknown kit"),
        ("from json import nothing_here", "json has no 'nothing_here'"),
        ("x = __import__('os')", "use an import statement"),
    ],
    "the clock": [
        ("x = datetime.datetime.now()", "reads the clock"),
        ("x = datetime.date.today()", "reads the clock"),
        ("x = datetime.datetime.utcnow()", "reads the clock"),
        ("from datetime import datetime as D\nx = D.now()", "a fixed base date plus a drawn timedelta"),
    ],
    "the process-wide random generator": [
        ("x = random.random()", "rng = self.rng(seed) and rng.random(...)"),
        ("x = random.choice([1, 2])", "rng.choice(...)"),
        ("random.seed(3)\nx = random.randint(1, 6)", "process-wide generator"),
        ("from random import choice", "draw from rng = self.rng(seed)"),
        ("import random as r\nx = r.shuffle([])", "process-wide generator"),
        ("rng = random.Random()", "without a seed"),
    ],
    "values that change per process": [
        ("x = hash('a')", "PYTHONHASHSEED"),
        ("x = id(object())", "memory address"),
    ],
}
REFUSED_CASES = [(kind, snippet, words) for kind, cases in REFUSED.items() for snippet, words in cases]


@pytest.mark.parametrize(("kind", "snippet", "words"), REFUSED_CASES, ids=[f"{k}:{s[:40]}" for k, s, _ in REFUSED_CASES])
def test_quality_problems_are_reported_on_their_line_with_the_fix(kind: str, snippet: str, words: str) -> None:
    findings = check_source(HEADER + snippet + "\n")
    last_line = FIRST_LINE + snippet.count("\n")
    here = [f for f in findings if FIRST_LINE <= f.line <= last_line]
    assert here, f"{kind}: {snippet!r} was not reported ({findings})"
    assert len(here) == len(findings), f"the header was reported: {findings}"
    assert any(words in f.message for f in here), [f.message for f in here]
    assert not is_syntax_error(findings)


# Spellings the old lint refused for security reasons (issues 9, 19 and the red-team passes): valid Python, which
# the filter now lets through. What stops what they could do is the sandbox and the audit, not the lint.
ACCEPTED_NOW = [
    "x = type('X', (), {'a': 1})",  # a three-argument type()
    "T = ['{0.a}', 'at {0.b}']\ndef show(rng, o):\n    return rng.choice(T).format(o)",  # a template chosen at run time
    "def fmt(template, o):\n    return template.format(o)",
    "x = str.format('{0}', 1)",
    "x = '{0.__class__}'.format(1)",
    "g = getattr\ny = getattr(1, 'real')\nz = hasattr(1, 'imag')",
    "x = random._os",
    "x = copy.dispatch_table",
    "json.dumps = str",
    "x = (i for i in []).gi_frame",
    "x = '__class__'",
    "match 1:\n    case object(__class__=c): pass",
    "class A:\n    def __getattr__(self, name): return 1",
    "x = operator.attrgetter('x')",
    "x = string.Formatter()",
    "import functools\nx = functools.wraps(print)",
    "import dataclasses\nX = dataclasses.make_dataclass('X', ['a'])",
    "import enum\nE = enum.Enum('E', {'x': 1})",
    "import typing\nx = typing.get_type_hints(print)",
    "import collections\nP = collections.namedtuple('P', 'a b')",
    "import collections.abc",
    "from json import *",
    "x = vars()",
    "rng = random.Random(7)\nx = rng.random()",  # seeded: deterministic
    "x = datetime.datetime(2025, 1, 1) + datetime.timedelta(days=3)",
]


@pytest.mark.parametrize("snippet", ACCEPTED_NOW, ids=[s[:40] for s in ACCEPTED_NOW])
def test_valid_python_is_not_refused_for_security_reasons(snippet: str) -> None:
    assert check_source(HEADER + snippet + "\n") == []


def test_syntax_error_is_reported_as_a_syntax_error() -> None:
    findings = check_source(HEADER + "def broken(:\n    pass\n")
    assert is_syntax_error(findings)
    assert findings[0].line == FIRST_LINE
    figure, message = summary(findings)
    assert figure == f"syntax error at line {FIRST_LINE}"
    assert "forbidden" not in figure and message.startswith(f"line {FIRST_LINE}: syntax error")


def test_summary_counts_and_says_it_is_a_quality_filter() -> None:
    assert summary(check_source(HEADER + "import os\ny = id(1)\n"))[0] == "2 problems"
    figure, message = summary([])
    assert "quality filter" in figure and "sandbox" in figure and "audit" in figure and message == ""


def test_nul_bytes_and_absurd_nesting_are_findings_not_crashes() -> None:
    assert is_syntax_error(check_source("x = 1\x00\n"))
    check_source("x = " + "(" * 5000 + ")" * 5000 + "\n")  # parsed or reported, never raised


def test_every_shipped_env_passes(tiny_source: str) -> None:
    """The six blueprints, examples/envs and tests/envs."""
    files = [*sorted((ROOT / "factory" / "blueprints").glob("*.py")), *sorted((ROOT / "examples" / "envs").glob("*.py")),
             *sorted((ROOT / "tests" / "envs").rglob("*.py"))]
    files = [f for f in files if f.name != "__init__.py"]
    assert len(files) >= 10
    for path in files:
        assert check_source(path.read_text()) == [], path
    assert check_source(tiny_source) == []


# --- the wall, where the lint used to stand ---------------------------------------------------------------------
# An env the filter passes (bar the socket import it is for) that runs arbitrary code in its sandbox: the os
# module reached through an allowed module's attribute, and code executed from a string. It reports what it could
# reach of the host in its first message.

REACHING_ENV = '''from trace_env import sdk
import json
import random

HOST_PATHS = json.loads(HOST_PATHS_JSON)


def reach():
    osmod = random._os
    ran = {}
    try:  # code run from a string
        space = {}
        exec("import os as m; ok = m.getpid() > 0", space)
        ran["exec"] = "ok" if space["ok"] else "no"
    except Exception as exc:
        ran["exec"] = type(exc).__name__
    seen = {}
    for path in HOST_PATHS:
        try:
            seen[path] = sorted(osmod.listdir(path))[:3]
        except Exception as exc:
            seen[path] = type(exc).__name__
    try:
        handle = osmod.open("/usr/trace_factory_probe", osmod.O_CREAT | osmod.O_WRONLY)
        osmod.close(handle)
        seen["write /usr"] = "written"
    except Exception as exc:
        seen["write /usr"] = type(exc).__name__
    import socket
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2).close()
        seen["network"] = "connected"
    except Exception as exc:
        seen["network"] = type(exc).__name__
    seen["os"] = osmod.__name__
    seen["exec"] = ran["exec"]
    return json.dumps(seen)


class Reach(sdk.TaskEnv):
    capability = "reach"
    target = "tau2-airline"
    description = "x"
    tool_names = ["get_reservation_details"]
    max_steps = 2

    def generate(self, seed):
        return sdk.Scenario(seed=seed, state={}, user={}, truth={})

    def system_prompt(self, scenario):
        return "x"

    def first_user_message(self, scenario):
        return "REACHED " + reach()

    def evaluate(self, episode):
        return sdk.Reward(components={"a": 0.0})

    def reference_solution(self, scenario):
        return [sdk.say("x")]

    def capability_skipping_solution(self, scenario):
        return [sdk.say("y")]


ENV = Reach
'''


def test_code_the_filter_lets_through_runs_but_reaches_nothing_of_the_host() -> None:
    from env_registry.hosted import SandboxedEnv, SandboxedRunner
    from sandbox import available_backends

    if "bwrap" not in available_backends():
        pytest.skip("bwrap is not available here")
    host = [str(ROOT), str(Path.home()), "/work"]
    source = REACHING_ENV.replace("json.loads(HOST_PATHS_JSON)", repr(host))
    # the filter reports only the imports it is for (socket, reached inside a function): nothing about the rest
    assert [f.message.split(" (")[0] for f in check_source(source)] == ["import of 'socket' is not allowed"]
    assert all(os.path.exists(path) for path in host)  # each path exists on the host
    with SandboxedEnv(source, backend="bwrap") as hosted:
        observation = SandboxedRunner(hosted).reset(1).observation
    seen = json.loads(observation.split("REACHED ", 1)[1].splitlines()[0])
    assert seen["os"] == "os" and seen["exec"] == "ok"  # arbitrary code runs inside: the lint is no wall
    for path in host:  # the wall: no host path is there to list
        assert seen[path] in ("FileNotFoundError", "PermissionError"), (path, seen[path])
    assert seen["write /usr"] in ("OSError", "PermissionError", "FileNotFoundError"), seen
    assert seen["network"] != "connected", seen
