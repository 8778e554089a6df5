"""``factory eval --env``: the base and each adapter alone on a registered env's held-out seeds.

The real gated precondition_verification env (played in the sandbox), the tiny model and a real PEFT
adapter. Every arm's per-seed rewards must be exactly what the trainer's own held-out evaluation
(``trainer.heldout.evaluate_adapter``) gives for that model on the same seeds and settings, and an adapter
from a ``factory train`` run folder is evaluated with that run's settings (its held-out seeds, compact tools).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factory.cli import app
from tests.evaluate.conftest import CAPABILITY

runner = CliRunner()
ENV_ID = f"trace/{CAPABILITY}-v0"
LIMITS = ["--heldout-seeds", "2", "--max-tokens", "8"]


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def reference(tiny_path: Path, adapter: Path | None, settings: list[str]):
    from trainer.config import load_config
    from trainer.heldout import evaluate_adapter

    config = load_config(None, ["heldout.seeds=2", "rollout.max_new_tokens=8", *settings], model=str(tiny_path))
    return evaluate_adapter(ENV_ID, config, None if adapter is None else str(adapter))


def test_env_arms_are_the_trainers_heldout_evaluation(tiny_path: Path, adapters_dir: Path, gated_registry: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("TRACE_FACTORY_REGISTRY", str(gated_registry))
    out = tmp_path / "out"
    result = invoke("eval", "--env", CAPABILITY, "--adapters", adapters_dir, "--registry", gated_registry, *LIMITS, "--out", out)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "held-out seeds 2000000..2000001" in text and text.count("2/2") == 2, text
    report = json.loads((out / "results.json").read_text())
    assert report["env_id"] == ENV_ID and report["seeds"] == [2_000_000, 2_000_001] and report["temperature"] == 0
    assert [a["arm"] for a in report["arms"]] == ["base", f"adapter:{CAPABILITY}"]
    for arm, adapter in zip(report["arms"], [None, adapters_dir / CAPABILITY]):
        truth = reference(tiny_path, adapter, [])
        assert arm["valid"] == 2 and arm["error"] is None
        assert {int(k): v for k, v in arm["rewards"].items()} == truth.rewards and arm["mean"] == truth.mean
        assert {int(k): v for k, v in arm["generated"].items()} == truth.generated and arm["components"] == truth.components
        assert arm["low"] <= arm["mean"] <= arm["high"] and arm["cut_turns"] == truth.cut_turns
    assert report["arms"][0]["cut_turns"] > 0  # 8 tokens a turn: the untrained model's turns run to the limit
    adapter_arm = report["arms"][1]
    assert adapter_arm["generated"] != report["arms"][0]["generated"]  # the adapter arm really ran the adapter
    assert adapter_arm["delta"] == pytest.approx(adapter_arm["mean"] - report["arms"][0]["mean"])
    assert (out / "heldout.png").read_bytes()[:4] == b"\x89PNG"


def test_a_training_runs_settings_are_used(tiny_path: Path, adapters_dir: Path, gated_registry: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """An adapter inside a `factory train` run folder is judged on that run's held-out seeds and prompt."""
    from trainer.config import load_config

    monkeypatch.setenv("TRACE_FACTORY_REGISTRY", str(gated_registry))
    run = tmp_path / "runs" / CAPABILITY
    shutil.copytree(adapters_dir / CAPABILITY, run / "adapter")
    trained = load_config(None, ["heldout.first_seed=3000000", "heldout.seeds=2", "rollout.compact_tools=true"], model=str(tiny_path),
                          output_dir=str(run))  # fmt: skip
    (run / "run.json").write_text(json.dumps({"env_id": ENV_ID, "config": trained.model_dump(mode="json")}))
    result = invoke("eval", "--env", ENV_ID, "--adapters", tmp_path / "runs", "--registry", gated_registry, "--max-tokens", "8",
                    "--arms", "adapters", "--out", tmp_path / "out", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["seeds"] == [3_000_000, 3_000_001] and report["compact_tools"] is True
    assert report["settings_from"] == str(run / "run.json")
    truth = reference(tiny_path, run / "adapter", ["heldout.first_seed=3000000", "heldout.seeds=2", "rollout.compact_tools=true"])
    assert {int(k): v for k, v in report["arms"][0]["generated"].items()} == truth.generated


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", CAPABILITY, "--target", "tau2-airline"], "not both"),
        (["--env", "no_such_capability"], "no_such_capability"),
        (["--target", "tau2-airline", "--heldout-seeds", "4"], "go with --env"),
        (["--target", "tau2-airline", "--first-seed", "3"], "go with --env"),
        ([], "name what to evaluate"),
        (["--env", CAPABILITY, "--arms", "nonsense"], "unknown arm"),
    ],
)
def test_bad_input_is_one_line(args: list[str], message: str, gated_registry: Path, tmp_path: Path) -> None:
    result = invoke("eval", *args, "--registry", gated_registry, "--model", tmp_path, "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
