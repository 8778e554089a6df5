"""The generation prompt shows the target's world kit and a worked example built on it, within the reply budget."""

from __future__ import annotations

import importlib

import pytest

from factory.synthesis.loop import MAX_REPLY_TOKENS
from factory.synthesis.prompts import example_blueprint, generation_prompt, kit_reference
from schemas.capability import Capability
from schemas.targets import load_target
from schemas.validation import ValidationConfig
from trace_env.kits import KIT_FOR_TARGET, SHARED_KITS

CAPABILITY = Capability(name="escalation_judgment", description="Hands a request it may not handle to a human agent.")


@pytest.mark.parametrize("target", sorted(KIT_FOR_TARGET))
def test_prompt_shows_the_kit_api_and_an_example_built_on_it(target: str) -> None:
    prompt = generation_prompt(CAPABILITY, load_target(target), ValidationConfig())
    kit = KIT_FOR_TARGET[target]
    reference = kit_reference(target)
    assert reference in prompt
    for name in (kit, *SHARED_KITS):  # every public name of every kit the env may import is listed
        module = importlib.import_module(f"trace_env.kits.{name}")
        assert f"### `from trace_env.kits import {name}`" in reference
        missing = [member for member in module.__all__ if f"`{member}" not in reference]
        assert not missing, (name, missing)
    _, source = example_blueprint(target)
    assert f"```python\n{source}```" in prompt
    assert f"from trace_env.kits import {kit}" in source and "from env_registry" not in source
    assert "from trace_env.kits import" in prompt.split("## The env contract")[1]


@pytest.mark.parametrize("target", sorted(KIT_FOR_TARGET))
def test_worked_example_leaves_most_of_the_reply_budget(target: str) -> None:
    """Code tokenises at 3.5 to 4 characters per token (o200k_base); counting 3 overestimates on purpose. The
    exact figures are in bench/bench_prompt_tokens.py."""
    _, source = example_blueprint(target)
    assert len(source) / 3 < 0.6 * MAX_REPLY_TOKENS


def test_tool_mixins_list_every_target_tool_they_implement() -> None:
    reference = kit_reference("tau2-airline")
    from trace_env.kits import tau2_airline

    line = next(row for row in reference.splitlines() if row.startswith("- class `AirlineTools`"))
    assert all(tool in line for tool in tau2_airline.TOOL_NAMES)


def test_prompt_states_every_check_of_the_gate() -> None:
    """The model is told every check its env must pass; a new check the prompt does not name fails here."""
    from factory.validation.gate import CHECK_NAMES

    prompt = generation_prompt(Capability(name="refund_rule", description="x"), load_target("tau2-airline"), ValidationConfig())
    gate = prompt[prompt.index("## The validation gate"):]
    missing = [name for name in CHECK_NAMES if name != "interface" and f"- {name.replace('_', ' ')}:" not in gate.lower()]
    assert missing == [], missing


#: What the contract says the static check refuses, each as a line the check must refuse (issue 32: the lint is a
#: quality filter; the prompt must not teach refusals it no longer makes, nor leave out the ones it does).
REFUSED = {"`time`": "import time", "`os`": "import os", "`sys`": "import sys", "`uuid`": "import uuid",
           "`pathlib`": "import pathlib", "`__import__()`": "m = __import__('json')",
           "relative imports": "from . import sdk", "`datetime.now()`": "import datetime\nx = datetime.datetime.now()",
           "`date.today()`": "import datetime\nx = datetime.date.today()", "`.utcnow()`": "import datetime\nx = datetime.datetime.utcnow()",
           "`random.choice(...)`": "import random\nx = random.choice([1, 2])", "`random.Random()` without a seed": "import random\nr = random.Random()",
           "`hash()`": "x = hash('a')", "`id()`": "x = id(object())"}
#: Valid Python the old strict lint refused and the prompt no longer forbids.
ALLOWED = {"getattr": "x = getattr(object(), 'y', 1)", "setattr": "class A:\n    pass\nsetattr(A, 'b', 1)",
           "three-argument type": "T = type('T', (), {'a': 1})", "underscores": "def _helper():\n    return 1",
           "a template chosen at run time": "x = ['{0}', '{0}!'][1].format(2)", "module stores": "import math\nmath.tau2 = 1"}


def test_the_contract_is_true_to_the_static_check() -> None:
    from factory.validation.static import check_source

    prompt = generation_prompt(Capability(name="refund_rule", description="x"), load_target("tau2-airline"), ValidationConfig())
    contract = prompt[prompt.index("## The env contract"):prompt.index("It defines exactly one subclass")]
    for said, line in REFUSED.items():
        assert said in contract, said
        assert check_source(line), f"the contract says the static check refuses {said}, and it passes: {line!r}"
    for what, line in ALLOWED.items():
        assert check_source(line) == [], (what, check_source(line))
    for old in ("`getattr`", "`eval`", "`exec`", "`globals`", "`vars`", "starting with `_`", "module attributes"):
        assert old not in contract, f"the contract still forbids {old}, which the static check passes"
