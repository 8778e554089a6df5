"""Pipeline configs: the shipped examples load, and every mistake in a config is one line naming the key."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factory.cli import app
from factory.pipeline.config import ConfigError, load_config
from tests.conftest import REPO_ROOT

runner = CliRunner()
EXAMPLES = REPO_ROOT / "examples"
MINIMAL = 'model = "tiny"\n[[targets]]\nname = "tau2-airline"\n'


def test_the_cpu_example_is_small_and_the_gpu_example_uses_vllm() -> None:
    cpu = load_config(EXAMPLES / "pipeline-cpu.toml")
    assert cpu.model == "tiny" and cpu.device == "cpu" and cpu.rollouts.user == "scripted"
    assert sum(t.limit or 0 for t in cpu.targets) <= 5 and cpu.rollouts.trials == cpu.eval.trials == 1
    assert cpu.train["grpo"]["iterations"] <= 2 and [f.name for f in cpu.analyze.fallback] == ["precondition_verification"]
    assert cpu.build.gate  # reduced gate settings, stated in the report
    gpu = load_config(EXAMPLES / "pipeline-gpu-vllm.toml")
    assert gpu.device == "cuda" and gpu.rollouts.policy.startswith("vllm:") and gpu.eval.engine == "server"
    assert gpu.train["rollout"]["engine"] == "vllm" and {t.name for t in gpu.targets} == {"tau2-airline", "tau2-retail"}


@pytest.mark.parametrize(
    "text, message",
    [
        (MINIMAL + "[rollouts]\nmax_step = 3\n", "rollouts.max_step: unknown key (did you mean 'max_steps'?)"),
        (MINIMAL + "[rollout]\n", "rollout: unknown key (did you mean 'rollouts'?)"),
        (MINIMAL + "[eval]\ntrials = 0\n", "eval.trials: Input should be greater than or equal to 1"),
        (MINIMAL + "[build.gate]\nsolvability_seed = 8\n", "build.gate: unknown gate key 'solvability_seed' (did you mean 'solvability_seeds'?)"),
        (MINIMAL + "[route]\ndebias = \"always\"\n", "route.debias: Input should be 'none' or 'cyclic'"),
        (MINIMAL + "[train]\nmodel = \"x\"\n", "train: model is set by the pipeline"),
        ('model = "tiny"\n[[targets]]\nname = "tau2-telecom"\n', "target 'tau2-telecom' cannot be evaluated"),
        ('model = "tiny"\n[[targets]]\nname = "tau2-airline"\n[[targets]]\nname = "tau2-airline"\n', "a target is listed twice"),
        ('[[targets]]\nname = "tau2-airline"\n', "model: required key is missing"),
        ('sandbox = "jail"\n' + MINIMAL, "sandbox: 'jail' is not a sandbox backend"),
        (MINIMAL + "[eval]\nengine = \"server\"\n", "eval.engine = 'server' needs eval.base_url"),
        ("model = tiny\n", "not valid TOML"),
    ],
)
def test_a_bad_config_is_one_line(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert message in str(caught.value) and str(caught.value).startswith(f"--config {path}: ")
    result = runner.invoke(app, ["run", "--config", str(path), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 2 and message in " ".join(result.output.split())
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_config_that_is_a_fifo_or_a_folder_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo, folder = tmp_path / "pipeline.toml", tmp_path / "folder.toml"
    os.mkfifo(fifo)  # a plain read would block until someone writes to it
    folder.mkdir()
    messages: list[str] = []

    def read_both() -> None:
        for path in (fifo, folder):
            with pytest.raises(ConfigError) as caught:
                load_config(path)
            messages.append(str(caught.value))

    reader = threading.Thread(target=read_both, daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "reading a FIFO config blocked"
    assert messages == [f"--config {fifo}: is a FIFO (named pipe), not a file; pass a TOML config file",
                        f"--config {folder}: is a folder, not a file; pass a TOML config file"]


def test_train_keys_are_checked_by_the_trainers_own_model(tmp_path: Path) -> None:
    pytest.importorskip("trainer.config")
    path = tmp_path / "pipeline.toml"
    path.write_text(MINIMAL + "[train.grpo]\niteration = 3\n")
    with pytest.raises(ConfigError, match=r"train: grpo.iteration: unknown key \(did you mean 'iterations'\?\)"):
        load_config(path)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--config", "missing.toml"], "--config missing.toml: no such file"),
        (["--config", str(EXAMPLES / "pipeline-cpu.toml"), "--until", "deploy"], "--until 'deploy' is not a stage"),
        (["--config", str(EXAMPLES / "pipeline-cpu.toml"), "--force", "train,rollout"], "--force 'rollout' is not a stage"),
    ],
)
def test_bad_flags_are_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["run", *args])
    assert result.exit_code == 2 and message in result.output and len(result.output.strip().splitlines()) == 1


def test_plan_of_a_new_run_says_what_would_run_and_writes_nothing(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "--config", str(EXAMPLES / "pipeline-cpu.toml"), "--run-dir", str(tmp_path / "run"), "--plan", "--json"])
    assert result.exit_code == 0, result.output
    steps = [(s["stage"], s["action"]) for s in json.loads(result.stdout)]
    assert steps == [("rollouts", "run"), ("analyze", "later"), ("build", "later"), ("train", "later"), ("route", "later"), ("eval", "later")]
    assert not (tmp_path / "run").exists()


def test_help_lists_run_and_eval_with_examples() -> None:
    listing = runner.invoke(app, ["--help"])
    assert listing.exit_code == 0 and "run" in listing.output and "eval" in listing.output
    for command in ("run", "eval"):
        helped = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert helped.exit_code == 0 and "Examples:" in helped.output and f"factory {command} " in helped.output
