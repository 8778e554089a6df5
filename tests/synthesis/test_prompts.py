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
