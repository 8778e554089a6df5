"""The static check is a strict lint: every bypass family of the red-team pass (issue 9) is refused with its
line, a syntax error is reported as one, and plain env code (the tiny env, blueprint-style helpers) passes.

Each case is a snippet placed after a fixed header, so the expected line is known: the test asserts that a
finding names exactly that line (not merely that *something* was refused)."""

from __future__ import annotations

import pytest

from factory.validation.static import check_source, is_syntax_error, summary

HEADER = "from trace_env import sdk\nimport json\nimport random\nimport operator\nimport string\nimport copy\nimport datetime\n"
FIRST_LINE = HEADER.count("\n") + 1

FAMILIES: dict[str, list[str]] = {
    # private attributes of allowed modules that hold os, sys or the builtins
    "private_module_attributes": [
        "x = random._os", "x = json._default_encoder", "x = sdk._internal", "x = copy._deepcopy_dispatch",
    ],
    # an allowed module's attribute that is itself a module that is not allowed
    "module_attribute_is_a_module": [
        "x = datetime.sys", "x = json.decoder", "x = json.codecs",
    ],
    # dotted imports where only the first name is allow-listed
    "dotted_imports": [
        "import json.tool", "import collections.abc", "import os.path", "from json import decoder",
        "import trace_env.handler", "from trace_env import handler", "from trace_env.engine import run_episode",
        "from env_registry import registry", "import xml.etree.ElementTree as et", "from . import x",
    ],
    # names imported with from m import _x, or a star
    "private_imported_names": [
        "from random import _os", "from json import _default_decoder", "from trace_env.sdk import _state",
        "from json import *", "from random import Random as _R",
    ],
    # getattr and friends under any name
    "reflection_names": [
        "g = getattr", "h = hasattr", "def f(getattr=None): pass", "x = vars()", "x = globals()",
        "x = print.getattr", "setattr(o, 'x', 1)", "eval('1')", "exec('x=1')", "compile('1', 'f', 'eval')",
        "open('/etc/passwd')", "x = id(o)", "x = hash('a')", "__import__('os')", "x = __builtins__",
        "lambda _x: 1", "f(_secret=1)",
    ],
    # operator.attrgetter / methodcaller and Formatter field access with dunder strings
    "operator_and_formatter": [
        "operator.attrgetter('x')", "from operator import methodcaller", "string.Formatter()",
        "from string import Formatter", "x = '{0.__class__}'.format(1)", "x = '{0._secret}'.format(o)",
        "x = '{0.gi_frame}'.format(o)", "x = operator.attrgetter",
    ],
    # generator and traceback frames
    "frames": [
        "x = (i for i in []).gi_frame", "x = g.gi_frame.f_back.f_globals", "x = tb.tb_frame", "x = f.f_builtins",
        "x = c.cr_frame", "x = e.__traceback__", "x = type(1).mro()",
    ],
    # class patterns in match statements, whose keyword attributes are strings
    "match_class_patterns": [
        "match 1:\n    case object(__class__=c): pass",
        "match 1:\n    case object(gi_frame=f): pass",
        "match 1:\n    case {'__globals__': g}: pass",
        "match 1:\n    case [*_rest]: pass",
    ],
    # copy protocol hooks and other dunder definitions
    "copy_protocol_hooks": [
        "class A:\n    def __reduce_ex__(self, protocol): return (print, ())",
        "class A:\n    def __deepcopy__(self, memo): return self",
        "class A:\n    def __getattr__(self, name): return 1",
        "copy.dispatch_table[int] = print",
        "x = copy.dispatch_table",
    ],
    # stores to attributes (or items) of modules, or of names taken from one
    "module_attribute_stores": [
        "json.dumps = str", "sdk.TaskEnv.evaluate = None", "del json.loads", "random.x = 1",
        "T = sdk.TaskEnv\nT.evaluate = None", "for json.x in []: pass", "sdk.SOMETHING['k'] = 1",
        "sdk.SOMETHING.append(1)", "json = 1", "x = [json]",
    ],
    # strings that spell dunders, wherever they end up
    "dunder_strings": [
        "x = '__class__'", "x = b'__globals__'", "x = dict(**{'__init_subclass__': 1})", "x = 'a__'",
    ],
    # clock reads
    "clock_reads": [
        "x = datetime.datetime.now()", "x = datetime.date.today()", "x = datetime.datetime.utcnow()",
        "x = datetime.datetime.fromtimestamp(0)", "from datetime import datetime as D\nx = D.now()",
        "import time", "from time import monotonic", "x = moment.now()", "from datetime import date\nx = date.today()",
    ],
}
CASES = [(family, snippet) for family, snippets in FAMILIES.items() for snippet in snippets]


@pytest.mark.parametrize(("family", "snippet"), CASES, ids=[f"{f}:{s[:40]}" for f, s in CASES])
def test_bypass_is_refused_with_its_line(family: str, snippet: str) -> None:
    findings = check_source(HEADER + snippet + "\n")
    last_line = FIRST_LINE + snippet.count("\n")
    lines = {f.line for f in findings}
    assert findings, f"{family}: {snippet!r} was not refused"
    assert lines & set(range(FIRST_LINE, last_line + 1)), f"{family}: findings {findings} do not name line {FIRST_LINE}"
    assert not is_syntax_error(findings), findings


def test_every_finding_names_the_rule() -> None:
    findings = check_source(HEADER + "x = random._os\n")
    assert [(f.line, f.message) for f in findings] == [
        (FIRST_LINE, "attribute '_os' starts with '_' (private and dunder attributes are not allowed)")
    ]


def test_syntax_error_is_reported_as_a_syntax_error() -> None:
    findings = check_source(HEADER + "def broken(:\n    pass\n")
    assert is_syntax_error(findings)
    assert findings[0].line == FIRST_LINE
    figure, message = summary(findings)
    assert figure == f"syntax error at line {FIRST_LINE}"
    assert "forbidden" not in figure and message.startswith(f"line {FIRST_LINE}: syntax error")


def test_summary_counts_and_says_it_is_a_first_filter() -> None:
    assert summary(check_source(HEADER + "x = random._os\ny = id(1)\n"))[0] == "2 forbidden constructs"
    figure, message = summary([])
    assert "first filter" in figure and "sandbox is the security boundary" in figure and message == ""


def test_nul_bytes_and_absurd_nesting_are_findings_not_crashes() -> None:
    assert is_syntax_error(check_source("x = 1\x00\n"))
    assert check_source("x = " + "(" * 5000 + ")" * 5000 + "\n")


ACCEPTED = '''\
from __future__ import annotations

import dataclasses
import datetime
from collections import Counter
from datetime import timedelta

from trace_env import sdk
from env_registry import sdk as legacy_sdk

UTC = datetime.timezone.utc
START = datetime.datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=3)


@dataclasses.dataclass
class Booking:
    ident: str
    seats: int = 1

    def __post_init__(self):
        self.seats = max(1, self.seats)


class Clock:
    def __init__(self, now):
        self.now = now
        self.today = now.date()


class Env(sdk.TaskEnv):
    capability = "x"

    def __init__(self):
        super().__init__()
        self.counts = Counter()

    def generate(self, seed):
        rng = self.rng(seed)
        for _ in range(3):
            rng.random()
        label = "{0} at {1}".format("a", "b")
        return legacy_sdk.Scenario(seed=seed, state={}, user={}, truth={"label": label, "when": Clock(START).today.isoformat()})

    def check(self, value):
        match value:
            case {"kind": kind}:
                return kind
            case Booking(ident=ident):
                return ident
            case _:
                return None
'''


def test_plain_env_code_passes(tiny_source: str) -> None:
    assert check_source(ACCEPTED) == []
    assert check_source(tiny_source) == []
