"""`factory train` end to end on the tiny model and the sandboxed wifi env: PEFT adapter output, metrics,
curve, summary; a resumed run reproduces the uninterrupted one's next step; bad input gets one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from factory.cli import app

RUN = [
    "--set", "threads=1", "--set", "sandbox='bwrap'", "--set", "grpo.groups=2", "--set", "grpo.group_size=4",
    "--set", "grpo.lr=1e-3", "--set", "rollout.max_new_tokens=24", "--set", "rollout.max_seq_len=1024",
    "--set", "warm_start.steps=10", "--set", "warm_start.lr=1e-2", "--set", "save_every=2", "--set", "heldout.seeds=4",
    "--set", "rollout.compact_tools=true",
]


def train(*args: str):
    return CliRunner().invoke(app, ["train", *args])


def rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_train_writes_a_peft_adapter_and_resumes_to_the_same_next_step(tmp_path: Path, wifi_env: str, tiny_model: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    full, split = tmp_path / "full", tmp_path / "split"
    result = train(wifi_env, "--model", str(tiny_model), "--output", str(full), "--iterations", "3", *RUN, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] and report["adapter"] == str(full / "adapter") and report["summary"]["iterations"] == 3

    # the adapter: PEFT's format, LoRA weights only, rank recorded, plain module names (what vLLM reads)
    adapter = json.loads((full / "adapter" / "adapter_config.json").read_text())
    assert adapter["peft_type"] == "LORA" and adapter["r"] == 16 and not adapter.get("modules_to_save")
    assert sorted(adapter["target_modules"]) == ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]
    weights = load_file(full / "adapter" / "adapter_model.safetensors")
    assert weights and all(".lora_A." in k or ".lora_B." in k for k in weights)
    loaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), str(full / "adapter"))
    assert any(float(p.abs().sum()) > 0 for n, p in loaded.named_parameters() if "lora_B" in n)
    # ...with how its conversations were rendered, in the final adapter and every checkpoint's (rollout/eval read it)
    records = [full / "adapter", *sorted((full / "checkpoints").glob("iter-*/adapter"))]
    assert len(records) >= 2 and all(json.loads((a / "trained_prompt.json").read_text()) == {"compact_tools": True} for a in records)

    lines = rows(full)
    assert [r["phase"] for r in lines] == ["warm_start"] * 10 + ["heldout"] + ["grpo"] * 3 + ["heldout"]
    held = [r for r in lines if r["phase"] == "heldout"]
    assert [r["iteration"] for r in held] == [0, 3] and all(r["valid_rollouts"] == r["rollouts"] == 4 for r in held)
    assert all(r["reward_low"] <= r["reward_mean"] <= r["reward_high"] for r in held)
    assert report["summary"]["heldout_last"]["reward"] == held[-1]["reward_mean"] and report["summary"]["heldout_last"]["episodes"] == 4
    grpo = [r for r in lines if r["phase"] == "grpo"]
    assert all(r["valid_rollouts"] == r["rollouts"] == 8 and not r["incomplete"] for r in grpo)
    for key in ("reward_mean", "reward_std", "success_rate", "zero_variance_share", "clip_fraction", "cut_turns",
                "context_truncated", "tokens_per_s", "env_share"):
        assert key in lines[-1]
    assert lines[0]["loss"] > lines[9]["loss"]  # the warm start learned the reference solutions
    # the trained adapter and the bare base model, evaluated alone on the same held-out seeds as in training
    from trainer.config import load_config
    from trainer.heldout import evaluate_adapter

    config = load_config(None, [a for a in RUN if a != "--set"], model=str(tiny_model))
    assert evaluate_adapter(wifi_env, config, str(full / "adapter")).mean == held[-1]["reward_mean"]
    assert evaluate_adapter(wifi_env, config, None).valid == 4
    assert (full / "reward_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((full / "summary.json").read_text())["iterations"] == 3

    # interrupted after 2 iterations, resumed for the third: the same third step
    assert train(wifi_env, "--model", str(tiny_model), "--output", str(split), "--iterations", "2", *RUN, "--json").exit_code == 0
    with open(split / "metrics.jsonl", "a") as torn:  # killed -9 while writing a row: resume drops the torn line
        torn.write('{"iteration": 2, "phase": "gr')
    again = train(wifi_env, "--model", str(tiny_model), "--output", str(split), "--iterations", "3", "--resume", *RUN, "--json")
    assert again.exit_code == 0, again.output
    third, resumed = lines[-2], [r for r in rows(split) if r["phase"] == "grpo"][-1]
    assert resumed["iteration"] == 2 and [r["phase"] for r in rows(split)].count("grpo") == 3
    assert rows(split)[-1]["phase"] == "heldout" and rows(split)[-1]["reward_mean"] == lines[-1]["reward_mean"]
    assert third["trained_rollouts"] > 0  # a real update happened in the compared step
    for key in ("loss", "logprob_mean", "reward_mean", "trained_rollouts", "clip_fraction", "generated_tokens"):
        assert resumed[key] == pytest.approx(third[key], rel=1e-6, abs=1e-9), key
    other = load_file(split / "adapter" / "adapter_model.safetensors")
    for name, tensor in weights.items():
        torch.testing.assert_close(other[name], tensor, rtol=1e-6, atol=1e-8)  # float32, the same ops replayed: ~8 ulps

    refused = train(wifi_env, "--model", str(tiny_model), "--output", str(split), "--iterations", "3", *RUN)
    assert refused.exit_code == 2 and "already holds a run" in refused.output and "pass --resume" in refused.output  # bad input, found before the model loads


@pytest.mark.parametrize(
    "args, message",
    [
        (["trace/nothing-v0", "--model", "m"], "no env trace/nothing-v0"),
        (["wifi_on", "--model", "m", "--set", "grpo.lr=-1"], "--set grpo.lr=-1: Input should be greater than 0"),
        (["wifi_on", "--model", "m", "--set", "grpo.nope=1"], "expected KEY=VALUE with KEY one of"),
        (["wifi_on", "--model", "m", "--config", "/nonexistent/train.toml"], "--config /nonexistent/train.toml: no such file"),
        (["wifi_on", "--model", "m", "--base-url", "http://127.0.0.1:9"], "--base-url and --collect-only go together"),
        (["wifi_on", "--all", "--model", "m"], "either ENV_ID or --all"),
        (["wifi_on", "--model", "/nonexistent/model"], "--model /nonexistent/model: no such folder"),
        (["wifi_on", "--model", "m", "--sandbox", "vm"], "--sandbox 'vm' is not a backend"),
    ],
)
def test_bad_input_gets_one_line(args: list[str], message: str, wifi_env: str, tmp_path: Path) -> None:
    result = train(*args, "--output", str(tmp_path / "run"))
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output


def test_config_file_and_overrides(tmp_path: Path) -> None:
    from trainer.config import load_config

    path = tmp_path / "train.toml"
    path.write_text('model = "m"\n[grpo]\ngroups = 3\nlr = 2e-5\n[lora]\nrank = 32\ntarget_modules = ["q_proj", "v_proj"]\n')
    config = load_config(path, ["grpo.lr=3e-5", "rollout.hint.share=0.25"], **{"grpo.iterations": 7})
    assert (config.grpo.groups, config.grpo.lr, config.grpo.iterations) == (3, 3e-5, 7)
    assert config.lora.rank == 32 and config.lora.target_modules == ["q_proj", "v_proj"] and config.rollout.hint.share == 0.25
    assert config.grpo.clip_high == config.grpo.epsilon == 0.2 and config.grpo.kl_coef == 0.0 and config.rollout.temperature == 1.0
    path.write_text("[grpo\n")
    with pytest.raises(Exception, match="not valid TOML"):
        load_config(path)


def test_all_skips_a_broken_registry_entry_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from env_registry.registry import Registry
    from tests.trainer.conftest import TEST_ENVS, register_env_file

    root = tmp_path / "registry"
    register_env_file(root, TEST_ENVS / "tiny_cancel.py", validate=False)
    manifest = next(root.glob("*/v*/manifest.json"))
    manifest.write_text("{ not json")  # corrupt: the entry is broken
    assert Registry(root).capabilities()  # still listed by name
    result = train("--all", "--model", "m", "--registry", str(root))
    assert result.exit_code == 2 and "Traceback" not in result.output
    text = " ".join(result.output.split())
    assert "skipped tiny_cancel:" in text and "no envs registered" in text


def test_an_edited_metrics_row_is_one_line_naming_it(tmp_path: Path) -> None:
    from trainer.errors import TrainError
    from trainer.report import read_metrics

    (tmp_path / "metrics.jsonl").write_text('{"iteration": 0}\nnot a row\n{"iteration": 1}\n')
    with pytest.raises(TrainError, match=r"metrics.jsonl line 2 is damaged \(\(top level\): Invalid JSON: .*\); remove that line to resume"):
        read_metrics(tmp_path)
