"""One ``--set`` parser and one error renderer for every command's settings (``schemas.config_file``, ``schemas.errors``).

The gate's flat keys (``factory build/validate``) and the trainer's dotted keys (``factory train``) go through the
same parser, so a value means the same everywhere, and a mistake is said the same way: the item as given, or
the file and key, the problem and the input.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from schemas.config_file import load_settings, parse_value
from schemas.errors import InputError, validation_message
from schemas.validation import ValidationConfig
from trainer.config import TrainConfig
from trainer.errors import TrainError


@pytest.mark.parametrize(
    "text, value",
    [("8", 8), ("1e-5", 1e-5), ("true", True), ("[1, 2]", [1, 2]), ("'bwrap'", "bwrap"), ("bwrap", "bwrap"), ("", "")],
)
def test_a_value_is_a_toml_literal_when_it_is_one_else_the_text(text: str, value: object) -> None:
    assert parse_value(text) == value


def test_flat_and_dotted_keys_parse_values_the_same_way() -> None:
    gate = load_settings(ValidationConfig, None, ["solvability_seeds=50", "paraphrase_tolerance=0.05"])
    train = load_settings(TrainConfig, {"model": "m"}, ["grpo.iterations=50", "grpo.lr=2e-5"], error=TrainError)
    assert (gate.solvability_seeds, gate.paraphrase_tolerance) == (50, 0.05)
    assert (train.grpo.iterations, train.grpo.lr) == (50, 2e-5)


def test_a_mistake_names_the_item_or_the_file_with_the_problem() -> None:
    with pytest.raises(InputError) as caught:
        load_settings(ValidationConfig, None, ["grpo_seeds=-1"])
    assert str(caught.value) == "--set grpo_seeds=-1: -1 is out of range (allowed: 1 to 1000)"
    with pytest.raises(TrainError) as caught:
        load_settings(TrainConfig, {"model": "m", "grpo": {"lr": 0}}, ["grpo.iterations=x"], source="--config t.toml", error=TrainError)
    said = str(caught.value)
    assert "--set grpo.iterations=x: Input should be a valid integer" in said
    assert "--config t.toml: grpo.lr: Input should be greater than 0 (got 0)" in said  # every problem, not the first
    with pytest.raises(InputError, match=r"--set 'solvability_seed=3': did you mean 'solvability_seeds'\? expected KEY=VALUE"):
        load_settings(ValidationConfig, None, ["solvability_seed=3"])


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    size: int = Field(ge=1)


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[Inner]


def test_the_renderer_gives_every_error_with_its_location_and_input() -> None:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate({"items": [{"name": "a", "size": 0}, {"nme": "b", "size": 2}]})
    assert validation_message(caught.value, Outer) == (
        "items[0].size: Input should be greater than or equal to 1 (got 0); "
        "items[1].name: required key is missing; items[1].nme: unknown key (did you mean 'name'?)"
    )
    assert validation_message(caught.value, Outer, limit=1) == "items[0].size: Input should be greater than or equal to 1 (got 0); and 2 more"
