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


# --- the closed rule (issue 19): the four root causes of the second red-team pass, each in spellings that no
# earlier test names; every one is refused on its line, with a message that says which part of the rule it breaks.

CLOSED_HEADER = ("from trace_env import sdk\nfrom trace_env import kits\nimport json\nimport enum\nimport abc\n"
                 "import functools\nimport dataclasses\nimport typing\nimport operator\n")
CLOSED_FIRST = CLOSED_HEADER.count("\n") + 1

ROOT_CAUSES: dict[str, tuple[str, list[str]]] = {
    # 1. a module reached under a name that no import made
    "module_flows": ("may only be used as", [
        "def pick():\n    return json",
        "def pick():\n    yield json",
        "x = json if True else None",
        "x = {'m': json}['m']",
        "x = dict(m=json)",
        "print(json)",
        "x = sdk.json",
        "x = kits.tau2_airline",
        "x = [*[json]]",
        # the issue's `with`: no allowed context manager hands a module back (a module has no __enter__, and defining
        # one is a dunder), so this shows the position rule only
        "with sdk.json as m:\n    pass",
    ]),
    # 2. an attribute read by a name given as data (functools.wraps and its relatives)
    "attribute_by_name": ("not on the allowlist|not an allowed builtin", [
        "functools.update_wrapper(lambda: 1, print, assigned=('x',))",
        "from functools import wraps as w",
        "x = functools.partial(functools.wraps, print)",
        "x = list(map(getattr, [1], ['real']))",
        "x = functools.reduce(getattr, ['real'], 1)",
        "x = functools.WRAPPER_ASSIGNMENTS",
        "x = operator.attrgetter",
    ]),
    # 3. a string turned into code (string annotations evaluated, and the like)
    "strings_evaluated": ("not on the allowlist|not an allowed builtin", [
        "@functools.singledispatchmethod\ndef f(self, x): pass",
        "x = typing.get_type_hints(print)",
        "x = typing.ForwardRef('print(1)')",
        "from typing import get_type_hints",
        "from functools import singledispatch as sd",
        "x = json.loads('{}', object_hook=eval)",
        "x = functools.singledispatch",
    ]),
    # 4. a class built from a computed dict (type() and every other class factory)
    "class_from_a_dict": ("builds a class|not an allowed builtin|not on the allowlist", [
        "t = type",
        "E = enum.Enum('E', {'x': 1})",
        "class Base(enum.Enum):\n    pass\nE = Base('E', {'x': 1})",
        "X = dataclasses.make_dataclass('X', ['a'])",
        "X = abc.ABCMeta('X', (), {})",
        "class Meta(abc.ABCMeta):\n    pass\nX = Meta('X', (), {})",
        "f = functools.partial(enum.Enum, 'E')",
        "from enum import Enum as E\nX = E('X', 'a b')",
        "x = [enum.IntEnum][0]",
    ]),
}
CLOSED_CASES = [(cause, words, snippet) for cause, (words, snippets) in ROOT_CAUSES.items() for snippet in snippets]


@pytest.mark.parametrize(("cause", "words", "snippet"), CLOSED_CASES, ids=[f"{c}:{s[:40]}" for c, _, s in CLOSED_CASES])
def test_every_root_cause_is_closed_whatever_the_spelling(cause: str, words: str, snippet: str) -> None:
    refused_on_its_lines(CLOSED_HEADER, CLOSED_FIRST, cause, words, snippet)


def refused_on_its_lines(header: str, first: int, cause: str, words: str, snippet: str) -> tuple[list, list]:
    """``snippet`` after ``header`` is refused on its own lines (from ``first``) in words matching ``words``;
    returns (those findings, all findings)."""
    import re

    findings = check_source(header + snippet + "\n")
    last = first + snippet.count("\n")
    here = [f for f in findings if first <= f.line <= last]
    assert here, f"{cause}: {snippet!r} was not refused: {findings}"
    assert any(re.search(words, f.message) for f in here), (cause, snippet, here)
    return here, findings


CLOSED_ACCEPTED = CLOSED_HEADER + '''
class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Shape(abc.ABC):
    @abc.abstractmethod
    def area(self):
        ...


@dataclasses.dataclass
class Item:
    name: str
    color: int = 1


@functools.lru_cache(maxsize=8)
def square(n: typing.Optional[int]) -> int:
    return (n or 0) ** 2


def describe(value):
    if isinstance(value, (Color, int)):
        return Color(1).name
    names = [c.name for c in Color] + [Color["RED"].name]
    total = functools.reduce(operator.add, [1, 2, 3])
    getter = operator.itemgetter("name")
    return json.dumps({"names": names, "total": total, "item": getter({"name": "x"}), "fields": len(dataclasses.fields(Item))})
'''


def test_the_closed_rule_still_accepts_plain_uses_of_those_modules() -> None:
    assert check_source(CLOSED_ACCEPTED) == []


def test_the_rule_fits_in_one_sentence() -> None:
    from factory.validation.static import RULE

    assert RULE.count(". ") == 0 and not RULE.endswith(".") and len(RULE) < 500


def test_the_allowlists_are_closed_over_modules_and_factories() -> None:
    """What makes the rule closed: an allow-listed stdlib attribute that is a module is an allowed module (the rule
    keeps it in place like an imported one), and no public class of a kit holds a module; the factories the rule
    lets through are exactly the metaclasses and enum classes it keeps in place."""
    import importlib
    import pkgutil
    import types

    import trace_env.kits as kits
    from factory.validation.static_allowlist import ALL_PUBLIC, STDLIB, is_factory, pair_allowed

    factories = set()
    for module, names in STDLIB.items():
        mod = importlib.import_module(module)
        listed = [n for n in dir(mod) if not n.startswith("_")] if names == ALL_PUBLIC else sorted(names)
        for name in listed:
            value = getattr(mod, name, None)
            if pair_allowed(module, name):
                if isinstance(value, types.ModuleType):  # then it is an allowed module, and kept in place as one
                    assert value.__name__ in STDLIB, f"{module}.{name} is the module {value.__name__}"
                if is_factory(value):
                    factories.add(f"{module}.{name}")
    assert {"abc.ABCMeta", "enum.Enum", "enum.IntEnum", "enum.StrEnum", "enum.Flag", "re.RegexFlag"} <= factories
    for factory in sorted(factories):  # every one of them, found by the rule itself, is kept in place
        module, name = factory.split(".")
        findings = check_source(f"import {module}\nX = {module}.{name}('X', {{'a': 1}})\n")
        assert findings and "builds a class" in findings[0].message, (factory, findings)
    for info in pkgutil.walk_packages(kits.__path__, "trace_env.kits."):
        mod = importlib.import_module(info.name)
        for name in dir(mod):
            value = getattr(mod, name)
            if isinstance(value, type) and not name.startswith("_"):
                held = [a for a in dir(value) if not a.startswith("_") and isinstance(getattr(value, a, None), types.ModuleType)]
                assert not held and not is_factory(value), (info.name, name, held)


def test_every_shipped_env_passes_the_closed_rule() -> None:
    """The six blueprints, examples/envs, tests/envs and the gate's valid bases (and, through the kit tests, the
    kits' public API as envs use it)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    files = [*sorted((root / "factory" / "blueprints").glob("*.py")), *sorted((root / "examples" / "envs").glob("*.py")),
             *sorted((root / "tests" / "envs").rglob("*.py"))]
    files = [f for f in files if f.name != "__init__.py"]
    assert len(files) >= 10
    for path in files:
        assert check_source(path.read_text()) == [], path


# --- attribute reads through a string at run time (redteam2 l02, l09, l10): str.format resolves {0.a.b} and {0[k]}
# with getattr/getitem, so its template must be one the lint reads; strings are never turned into field names.

FORMAT_HEADER = "import functools\nimport typing\nimport collections\nfrom collections import namedtuple as nt\n"
FORMAT_FIRST = FORMAT_HEADER.count("\n") + 1

FORMAT_CASES: dict[str, tuple[str, list[str]]] = {
    "computed_template": ("needs a template the lint can read", [
        "x = ('{0.' + 'real}').format(1)",
        "x = ''.join(['{0.', 'real}']).format(1)",
        "def f(template):\n    return template.format(1)",
        "T = ['{0}']\nT.append('{0' + '.real}')\nx = T[0].format(1)",
        "class R:\n    def choice(self, xs):\n        return xs[0] + '.real}'\nx = R().choice(['{0']).format(1)",
        "t = '{0}'\nt = '{0' + '.real}'\nx = t.format(1)",
        "x = {'a': '{0}'}.get('a').format_map({})",
        "A = B[0]\nB = (A,)\nx = A.format(1)",
    ]),
    "literal_reads_an_attribute": ("reads an attribute|private item", [
        "x = '{0.real}'.format(1)",
        "x = '{0:{1.real}}'.format(1, 2)",
        "x = '{0[_x]}'.format({})",
        "f = '{v.imag}'.format_map",
        "x = ['{0}', '{0.real}'][1].format(1)",
    ]),
    "template_as_data": ("takes the template as data|takes a format template", [
        "x = str.format('{0}', 1)",
        "x = functools.partial(str.format_map, '{a}')",
        "def f(fmt):\n    return fmt.vformat('{0}', [1], {})",
        "def f(fmt):\n    return fmt.get_field('0.real', [1], {})",
    ]),
    "strings_made_field_names": ("turns strings into a class", [
        "P = typing.NamedTuple('P', [('a', int)])",
        "P = collections.namedtuple('P', 'a b')",
        "P = nt('P', ['a'])",
        "T = typing.TypedDict('T', {'a': int})",
        "f = functools.partial(typing.NamedTuple, 'P')",
        "builders = [collections.namedtuple]",
    ]),
}
FORMAT_REFUSED = [(cause, words, snippet) for cause, (words, snippets) in FORMAT_CASES.items() for snippet in snippets]


@pytest.mark.parametrize(("cause", "words", "snippet"), FORMAT_REFUSED, ids=[f"{c}:{s[:40]}" for c, _, s in FORMAT_REFUSED])
def test_no_attribute_is_read_through_a_string(cause: str, words: str, snippet: str) -> None:
    import re

    findings = check_source(FORMAT_HEADER + snippet + "\n")
    last = FORMAT_FIRST + snippet.count("\n")
    here = [f for f in findings if FORMAT_FIRST <= f.line <= last]
    assert here, f"{cause}: {snippet!r} was not refused: {findings}"
    assert any(re.search(words, f.message) for f in here), (cause, snippet, here)


FORMAT_ACCEPTED = FORMAT_HEADER + '''
GREETING = "Hello {name}"
OFFSETS = {-1: "the day before {h}", 0: "on {h}"}
TEXTS = ["Send {n} now", "Wait {n} minutes"]


class Point(typing.NamedTuple):
    x: int
    y: int = 0


def lines(rng, record):
    offset = rng.choice(list(OFFSETS))
    out = [GREETING.format(name=record["name"]), OFFSETS[offset].format(h="Easter"), rng.choice(TEXTS).format(n=5)]
    out.append(rng.choice(["I'd like to {0}.", "Could you {0}?"]).format("cancel"))
    out.append(("{a} and {b}" if offset else "{b} then {a}").format(a=1, b=2))
    out.append("{0[name]} is {1:>{width}}".format(record, Point(1).x, width=4))
    out.append("{name}".format_map(record) + f"{record['name']!r:>10}" + format(3.5, ".2f"))
    template = "{who} said {what}"
    out.append(template.format(who="me", what=len(TEXTS)))
    return out
'''


def test_readable_templates_and_class_syntax_pass() -> None:
    """The spellings the blueprints use (a choice among literals, an item of a literal dict, a constant) pass."""
    assert check_source(FORMAT_ACCEPTED) == []


# --- issue 19, "the lint rule against your own new spellings of each root cause": every snippet below passes the
# lint as it stood at 966b3f8 (before the closed rule; checked by running that commit's static.py on NEW_HEADER +
# snippet: no finding at all), really reaches what its cause names when it runs (see
# test_each_new_spelling_really_reaches_what_its_cause_names), and is refused on its own lines by the closed rule.
# None of them is a spelling the issue or an earlier test lists, bar the issue's own kinds of position (walrus,
# default argument, class attribute, lambda, comprehension, unpacking), here with modules that pass the old lint.

NEW_HEADER = '''from __future__ import annotations

import abc
import calendar
import dataclasses
import enum
import fractions
import functools
import numbers
import operator
import re
import textwrap
import typing

from trace_env import sdk
from trace_env.kits import text

D = "_" * 2
ALWAYS = {D + "eq" + D: lambda self, other: True}
BOX = []


def gen():
    yield 1


G = gen()


class Sink:
    def update(self, value):
        BOX.append(value)
'''
NEW_FIRST = NEW_HEADER.count("\n") + 1
_SETTER = ("class Holder:\n    @property\n    def gi_frame(self):\n        return None\n    @gi_frame.setter\n"
           "    def gi_frame(self, value):\n        BOX.append(value)\n")

NEW_SPELLINGS: dict[str, tuple[str, list[str]]] = {
    # 1. a module reached under a name no import made. All pass the 966b3f8 lint, which checked a module only
    # under its import name: each takes an allowed module's attribute that is itself a module (re.enum,
    # calendar.datetime...), lets it flow, and reads a module that is not allowed (sys, builtins, copyreg) off it.
    "module_flows": ("may only be used as", [
        "if (m := re.enum):\n    REACHED = m.sys",
        "def pick(m=re.enum):\n    return m.bltns\nREACHED = pick()",
        "pick = lambda m=calendar.datetime: m.sys\nREACHED = pick()",
        "pick = lambda: textwrap.re\nREACHED = pick().copyreg",
        "REACHED = [m.sys for m in [re.enum]][0]",
        "REACHED = next(m.abc for m in (typing.collections,))",
        "REACHED = {k: m for k, m in [('k', fractions.re)]}['k'].copyreg",
        "for m in (calendar.datetime,):\n    REACHED = m.sys",
        "match re.enum:\n    case m:\n        REACHED = m.bltns",
        "match [fractions.re]:\n    case [m]:\n        REACHED = m.copyreg",
        "REACHED = [typing.collections][0].abc",
        "m, n = re.enum, 1\nREACHED = m.sys",
        "*ms, = (calendar.datetime,)\nREACHED = ms[0].sys",
        "class Holder:\n    m = re.enum\nREACHED = Holder.m.bltns",
        "@dataclasses.dataclass\nclass Holder:\n    m: object = fractions.re\nREACHED = Holder().m.copyreg",
        "class Holder:\n    def __init__(self):\n        self.m = re.enum\nREACHED = Holder().m.sys",
        "def use(m):\n    return m.sys\nREACHED = use(re.enum)",
        "def pick():\n    return calendar.datetime\nREACHED = pick().sys",
        "try:\n    raise LookupError(re.enum)\nexcept LookupError as caught:\n    REACHED = caught.args[0].bltns",
        "REACHED = functools.partial(print, fractions.re).args[0].copyreg",
        "REACHED = (None or re.enum).sys",
        "REACHED = max([sdk.re], key=str).copyreg",
        "m = text.datetime\nREACHED = m.sys",
        "REACHED = operator.itemgetter('k')({'k': re.enum}).bltns",
    ]),
    # 2. an attribute read by a name given as data. All pass the 966b3f8 lint, which refused only
    # functools.update_wrapper, literal templates' fields and the attribute names themselves: each reads a
    # generator's frame (the way to every caller's globals) without writing `.gi_frame`.
    "attribute_by_name": ("not on the allowlist|as data|template the lint can read|frame, code or generator", [
        "class Holder:\n    gi_frame = Sink()\nfunctools.wraps(G, assigned=(), updated=('gi_frame',))(Holder)\nREACHED = BOX[0]",
        "from functools import wraps\nclass Holder:\n    gi_frame = Sink()\nwraps(G, (), ['gi_frame'])(Holder)\nREACHED = BOX[0]",
        _SETTER + "functools.wraps(G, ('gi_frame',), ())(Holder())\nREACHED = BOX[0]",
        _SETTER + "copier = functools.partial(functools.wraps, assigned=('gi_frame',), updated=())\ncopier(G)(Holder())\n"
                  "REACHED = BOX[0]",
        "@functools.wraps(G, (), ('gi_frame',))\nclass Holder:\n    gi_frame = Sink()\nREACHED = BOX[0]",
        "REACHED = str.format_map('{g.gi_frame}', {'g': G})",
        "REACHED = str.format('{0.gi_frame}', G)",
        "REACHED = '{}{}'.format('{0.gi', '_frame}').format(G)",
        "template = textwrap.dedent('  {0.gi_frame}')\nREACHED = template.format(G)",
        # accepted before this commit too: a dataclass's fields are its __match_args__, and a class pattern reads
        # them off any subject the class claims through abc's register()
        "@typing.runtime_checkable\nclass Sends(typing.Protocol):\n    def send(self, value):\n        ...\n"
        "@dataclasses.dataclass\nclass Peek(abc.ABC):\n    gi_frame: object\nPeek.register(Sends)\n"
        "match G:\n    case Peek(frame):\n        REACHED = frame",
        "@dataclasses.dataclass\nclass Peek(abc.ABC):\n    gi_frame: object\nPeek.register(typing.get_origin(typing.Generator))\n"
        "match G:\n    case Peek(frame):\n        REACHED = frame",
    ]),
    # 3. a string evaluated. All pass the 966b3f8 lint, which refused typing.get_type_hints but not
    # functools.singledispatch/singledispatchmethod, whose register() evaluates the annotations with it (strings
    # that are data to the lint, or any annotation under `from __future__ import annotations`).
    "strings_evaluated": ("not on the allowlist", [
        "@functools.singledispatch\ndef show(x):\n    return x\n@show.register\n"
        "def show_int(x: 'BOX.append(\"evaluated\") or int'):\n    return x\nREACHED = BOX[0]",
        "from functools import singledispatch\ndef show(x):\n    return x\n"
        "def show_int(x: BOX.append('evaluated') or int):\n    return x\nsingledispatch(show).register(show_int)\nREACHED = BOX[0]",
        "class Shows:\n    @functools.singledispatchmethod\n    def show(self, x):\n        return x\n    @show.register\n"
        "    def show_int(self, x: 'BOX.append(\"evaluated\") or int'):\n        return x\nREACHED = BOX[0]",
        "from functools import singledispatchmethod as by_type\nclass Shows:\n    @by_type\n    def show(self, x):\n"
        "        return x\n    @show.register\n    def show_int(self, x: BOX.append('evaluated') or int):\n        return x\n"
        "REACHED = BOX[0]",
        "register = functools.singledispatch(print).register\ndef show_int(x: int) -> 'BOX.append(\"evaluated\")':\n"
        "    return x\nregister(show_int)\nREACHED = BOX[0]",
        "dispatchers = [functools.singledispatch]\ndef show_int(x: 'BOX.append(\"evaluated\") or int'):\n    return x\n"
        "dispatchers[0](print).register(show_int)\nREACHED = BOX[0]",
        "dispatch = functools.partial(functools.singledispatch)\n@dispatch(print).register\n"
        "def show_int(x: BOX.append('evaluated') or int):\n    return x\nREACHED = BOX[0]",
    ]),
    # 4. a class built from a computed dict (ALWAYS defines __eq__ to say yes to anything). All pass the 966b3f8
    # lint, which allowed type and checked no class factory.
    "class_from_a_dict": ("builds a class|not an allowed builtin|not on the allowlist|metaclass", [
        "Always = type('Always', (), ALWAYS)\nREACHED = Always()",
        "Meta = type(abc.ABC)\nREACHED = Meta('Always', (), ALWAYS)()",
        "Maker = abc.ABCMeta\nREACHED = Maker('Always', (), ALWAYS)()",
        "REACHED = numbers.ABCMeta('Always', (), ALWAYS)()",
        "Always = enum.Enum('Always', [('ONE', 1), *ALWAYS.items()])\nREACHED = Always.ONE",
        "REACHED = {'m': enum.Enum}['m']('Always', dict(ONE=1, **ALWAYS)).ONE",
        "from dataclasses import make_dataclass\nREACHED = make_dataclass('Always', [], namespace=ALWAYS)()",
        "REACHED = operator.call(abc.ABCMeta, 'Always', (), ALWAYS)()",
        "REACHED = functools.partial(abc.ABCMeta, 'Always', ())(ALWAYS)()",
        "REACHED = functools.reduce(lambda made, body: made('Always', (), body), [ALWAYS], abc.ABCMeta)()",
        "class Meta(type):\n    pass\nREACHED = Meta('Always', (), ALWAYS)()",
        # accepted before this commit too: a factory reached through a value the lint did not follow (a call's
        # result, a classmethod's cls, a decorator, an enum's members built by a metaclass mixed in)
        "REACHED = typing.get_origin(typing.Type)('Always', (), ALWAYS)()",
        "class Maker(abc.ABCMeta):\n    @classmethod\n    def itself(cls):\n        return cls\n"
        "REACHED = Maker.itself()('Always', (), ALWAYS)()",
        "@functools.partial\nclass Maker(abc.ABCMeta):\n    pass\nREACHED = Maker.func('Always', (), ALWAYS)()",
        "class Made(abc.ABCMeta, enum.Enum):\n    ALWAYS = ('Always', (), ALWAYS)\nREACHED = Made.ALWAYS()",
        "KEEP = []\ndef keep(made):\n    KEEP.append(made)\n    return made\n@keep\nclass Plain(enum.Enum):\n    pass\n"
        "REACHED = KEEP[0]('Always', dict(ONE=1, **ALWAYS)).ONE",
        "class Plain(enum.Enum):\n    @classmethod\n    def itself(cls):\n        return cls\n"
        "REACHED = Plain.itself()('Always', dict(ONE=1, **ALWAYS)).ONE",
        "class Plain(enum.Flag):\n    NONE = 0\n    @classmethod\n    def itself(cls):\n        return cls\n"
        "REACHED = Plain.itself()('Always', dict(ONE=1, **ALWAYS)).ONE",
    ]),
}
NEW_CASES = [(cause, words, snippet) for cause, (words, snippets) in NEW_SPELLINGS.items() for snippet in snippets]
NEW_IDS = [f"{c}:{s[:40]}" for c, _, s in NEW_CASES]


def test_the_new_spellings_header_passes() -> None:
    assert check_source(NEW_HEADER) == []
    assert {cause: len(snippets) >= 5 for cause, (_, snippets) in NEW_SPELLINGS.items()} == dict.fromkeys(NEW_SPELLINGS, True)


@pytest.mark.parametrize(("cause", "words", "snippet"), NEW_CASES, ids=NEW_IDS)
def test_new_spellings_of_each_root_cause_are_refused_on_their_lines(cause: str, words: str, snippet: str) -> None:
    here, findings = refused_on_its_lines(NEW_HEADER, NEW_FIRST, cause, words, snippet)
    assert len(here) == len(findings), f"the header was refused: {findings}"


@pytest.mark.parametrize(("cause", "words", "snippet"), NEW_CASES, ids=NEW_IDS)
def test_each_new_spelling_really_reaches_what_its_cause_names(cause: str, words: str, snippet: str) -> None:
    """Run it (outside any sandbox: what it reaches is only looked at) so no case is a straw man."""
    import sys
    import types

    from factory.validation.static_allowlist import module_allowed

    module = types.ModuleType(f"static_case_{abs(hash(snippet))}")
    sys.modules[module.__name__] = module  # dataclasses looks its class's module up
    try:
        exec(compile(NEW_HEADER + snippet + "\n", module.__name__, "exec"), module.__dict__)  # noqa: S102
    finally:
        del sys.modules[module.__name__]
    reached = module.__dict__["REACHED"]
    if cause == "module_flows":
        assert isinstance(reached, types.ModuleType) and not module_allowed(reached.__name__), reached
    elif cause == "attribute_by_name":
        assert isinstance(reached, types.FrameType) or str(reached).startswith("<frame at "), reached
    elif cause == "strings_evaluated":
        assert reached == "evaluated"
    else:
        assert reached == object() and reached == 42, reached


NEW_RULES_ACCEPTED = '''import abc
import dataclasses
import enum
import typing
from enum import auto


@enum.unique
class Color(enum.Enum):
    RED = 1
    BLUE = -2

    @classmethod
    def parse(cls, text):
        return cls[text.upper()]


class Level(enum.IntEnum):
    LOW = auto()
    HIGH = enum.auto()


class Access(enum.Flag):
    NONE = 0
    READ = 1
    WRITE = 2
    BOTH = 3


class Base(metaclass=abc.ABCMeta):
    @abc.abstractmethod
    def area(self):
        ...


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


def where(value, frame_count=0):
    match value:
        case Point(x, y) if isinstance(value, Point):
            return (x, y, frame_count, Color.parse("red").value, Level.HIGH, typing.get_args(typing.Optional[int]))
    return None
'''


def test_the_rule_still_accepts_enums_with_members_metaclass_keywords_and_dataclass_patterns() -> None:
    assert check_source(NEW_RULES_ACCEPTED) == []
