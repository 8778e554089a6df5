"""An adapter trained from a relative model folder loads with PEFT's own AutoPeftModelForCausalLM from any folder."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from trainer.portable_adapter import portable_base_name


def test_an_adapter_saved_from_a_relative_model_path_loads_from_another_folder(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from peft import AutoPeftModelForCausalLM, LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trainer import checkpoint

    from trainer import portable_adapter

    monkeypatch.setattr(portable_adapter, "_warned", set())  # warned once per process: an earlier test may have
    monkeypatch.chdir(tiny_model.parent)
    relative = f".{os.sep}{tiny_model.name}"
    policy = get_peft_model(AutoModelForCausalLM.from_pretrained(relative), LoraConfig(r=2, target_modules=["q_proj"]))
    with caplog.at_level(logging.WARNING, logger="trainer.portable_adapter"):
        adapter = checkpoint.write_adapter(policy, tmp_path / "run" / "adapter")
    written = json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert written == os.path.abspath(tiny_model)
    assert any("absolute path" in r.getMessage() and os.path.abspath(tiny_model) in r.getMessage() for r in caplog.records)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    loaded = AutoPeftModelForCausalLM.from_pretrained(str(adapter))
    assert loaded.peft_config["default"].r == 2


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"),
        ("/root/.cache/huggingface/hub/models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/7ae5", "Qwen/Qwen2.5-0.5B-Instruct"),
    ],
)
def test_hub_models_keep_or_regain_their_hub_id(name: str, expected: str, tmp_path: Path) -> None:
    assert portable_base_name(name, cwd=tmp_path) == expected
