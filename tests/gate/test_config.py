"""Every gate setting has a range; a value outside it is refused with the whole allowed range named, both
in the model and through ``factory validate --set``."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from factory.cli import app
from schemas.validation import ValidationConfig

CASES = [
    ("solvability_min_share", "2", "0 to 1"),
    ("load_timeout_s", "-1", "more than 0, at most 3600"),
    ("fuzz_examples", "0", "1 to 10000"),
    ("solvability_min_reward", "nan", "0 to 1"),
    ("first_seed", "-5", "0 to 2147483646"),
    ("run_seed", "-1", "0 to 2147483647"),
    ("workers", "65", "0 to 64"),
    ("memory_budget_mb", "8", "16 to 1048576"),
]


@pytest.mark.parametrize(("setting", "value", "allowed"), CASES)
def test_out_of_range_setting_is_refused_with_its_range(setting: str, value: str, allowed: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ValidationConfig.model_validate({setting: value})
    error = caught.value.errors()[0]
    assert error["loc"] == (setting,)
    assert f"{value} " in error["msg"] and f"(allowed: {allowed})" in error["msg"]


def test_every_setting_has_both_bounds() -> None:
    for name, field in ValidationConfig.model_fields.items():
        if field.annotation is bool:  # a switch has no range
            continue
        has = {b for m in field.metadata for b in ("ge", "gt", "le", "lt") if getattr(m, b, None) is not None}
        assert has & {"ge", "gt"} and has & {"le", "lt"}, f"{name} is unbounded: {has}"


def test_defaults_are_in_range() -> None:
    assert ValidationConfig.model_validate(ValidationConfig().model_dump()) == ValidationConfig()


def test_cli_set_names_the_range(tmp_path: Path, tiny_source: str) -> None:
    env = tmp_path / "env.py"
    env.write_text(tiny_source)
    result = CliRunner().invoke(app, ["validate", str(env), "--set", "solvability_min_share=2"])
    assert result.exit_code == 2
    assert "solvability_min_share" in result.output and "allowed: 0 to 1" in result.output
    assert "Traceback" not in result.output
