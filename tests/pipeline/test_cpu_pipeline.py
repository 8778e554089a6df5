"""The shipped CPU example, ``factory run --config examples/pipeline-cpu.toml``, end to end in a subprocess:
real τ² MCP servers, the sandboxed gate, GRPO with PEFT on the tiny model, the router and the evaluation.

The run is killed with SIGKILL in the middle of its last stage (eval, after it has finished an episode) and
started again: the finished stages are not run again (their files are untouched), the eval stage resumes
(the episode finished before the kill is kept as it was), and the run completes with its report. Then
every stage's output is checked against what the next stage read.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schemas.validation import ValidationConfig
from tests.conftest import REPO_ROOT
from tests.targets.helpers import requires_servers

pytest.importorskip("peft")
pytestmark = [requires_servers, pytest.mark.slow]
EXAMPLE = REPO_ROOT / "examples" / "pipeline-cpu.toml"
CAPABILITY = "precondition_verification"


def environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACE_LLM", "OPENAI_", "ANTHROPIC_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), str(REPO_ROOT)) if p)
    env["COLUMNS"] = "80"
    env.pop("TRACE_FACTORY_UNSAFE_INPROCESS", None)
    return env


def command(run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "factory.cli", "run", "--config", str(EXAMPLE), "--run-dir", str(run_dir), *extra]


def lines(path: Path) -> list[str]:
    """Complete lines only: a line being appended while we read is not one yet."""
    text = path.read_text() if path.exists() else ""
    return text[: text.rfind("\n") + 1].splitlines()


def state(run_dir: Path) -> dict:
    return json.loads((run_dir / "pipeline.json").read_text())


def snapshot(run_dir: Path) -> dict[str, bytes]:
    """Every file the finished stages wrote (and the registry), byte for byte."""
    out = {}
    for stage in ("rollouts", "analyze", "build", "train", "route", "registry"):
        for path in sorted((run_dir / stage).rglob("*")):
            if path.is_file():
                out[str(path.relative_to(run_dir))] = path.read_bytes()
    return out


def test_cpu_example_runs_every_stage_and_resumes_where_it_was_killed(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    env = environment(tmp_path)
    first_episode = run_dir / "eval" / "arms" / "base" / "tau2-airline" / "trajectories.jsonl"
    log = (tmp_path / "first.log").open("w")
    started = time.monotonic()
    process = subprocess.Popen(command(run_dir), cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while not lines(first_episode):
            assert process.poll() is None, f"the run ended before eval started:\n{(tmp_path / 'first.log').read_text()}"
            assert time.monotonic() - started < 400, "the CPU example took too long to reach the eval stage"
            time.sleep(0.2)
        killed_state = state(run_dir)
        finished = snapshot(run_dir)
        kept = lines(first_episode)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the run and everything it started (MCP servers, sandboxes)
        process.wait()
    assert {k: v["status"] for k, v in killed_state["stages"].items()} == {
        "rollouts": "done", "analyze": "done", "build": "done", "train": "done", "route": "done", "eval": "running",
    }  # fmt: skip

    again = subprocess.run(command(run_dir, "--json"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert again.returncode == 0, again.stdout + again.stderr
    outcomes = {o["stage"]: o["action"] for o in json.loads(again.stdout)["outcomes"]}
    assert outcomes == {"rollouts": "cached", "analyze": "cached", "build": "cached", "train": "cached", "route": "cached", "eval": "resumed"}
    assert "eval: resuming (interrupted last time)" in again.stderr
    assert snapshot(run_dir) == finished  # nothing before eval ran again
    assert lines(first_episode)[: len(kept)] == kept  # the episode finished before the kill was kept, not re-run
    assert state(run_dir)["stages"]["eval"]["attempts"] == 2

    check_handoffs(run_dir)
    report = (run_dir / "report" / "report.md").read_text()
    assert "These numbers are not meaningful" in report and "The analysis selected no capability" in report
    assert f"solvability_seeds 8 (default {ValidationConfig().solvability_seeds})" in report  # the reduced gate is stated
    for png in ("coverage.png", "reward_curves.png", "pass_rates.png"):
        assert (run_dir / "report" / png).read_bytes()[:4] == b"\x89PNG", png

    cached = subprocess.run(command(run_dir, "--json"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert cached.returncode == 0, cached.stderr
    assert {o["action"] for o in json.loads(cached.stdout)["outcomes"]} == {"cached"}

    person = subprocess.run(command(run_dir), cwd=tmp_path, env={**env, "COLUMNS": "200"}, capture_output=True, text=True, timeout=120)
    assert person.returncode == 0, person.stderr  # without --json: the summary table, then the report's path
    table = person.stdout[person.stdout.index("factory run:"):]
    for stage, result in (("rollouts", "5 episodes"), ("analyze", "5 trajectories"), ("build", "1/1 envs registered"),
                          ("train", f"{CAPABILITY}: last-10 reward"), ("route", "5 tasks routed"), ("eval", "base ")):  # fmt: skip
        assert stage in table and result in " ".join(table.split()), (stage, table)
    assert person.stdout.strip().splitlines()[-1] == f"report: {run_dir / 'report' / 'report.md'}"


def check_handoffs(run_dir: Path) -> None:
    """Each stage's files are what the next stage used."""
    from env_registry.registry import Registry
    from factory.rollout.store import RolloutStore

    rollouts = {t: RolloutStore.load(run_dir / "rollouts" / t) for t in ("tau2-airline", "tau2-retail")}
    assert [len(v) for v in rollouts.values()] == [3, 2]  # limit = 3 and 2, one trial
    analysis = json.loads((run_dir / "analyze" / "capabilities.json").read_text())
    assert sorted(analysis["sources"]) == sorted(str(run_dir / "rollouts" / t / "trajectories.jsonl") for t in rollouts)
    assert analysis["n_trajectories"] == 5
    plan = json.loads((run_dir / "analyze" / "plan.json").read_text())
    assert plan["source"] == "fallback" and [c["name"] for c in plan["capabilities"]] == [CAPABILITY]

    stored = Registry(run_dir / "registry").get(CAPABILITY)
    assert stored.manifest.validation == "passed" and stored.report["passed"]
    assert json.loads((run_dir / "build" / f"{CAPABILITY}.json").read_text())["gym_id"] == stored.manifest.gym_id

    trained = run_dir / "train" / CAPABILITY
    metrics = [json.loads(line) for line in lines(trained / "metrics.jsonl")]
    assert [m["phase"] for m in metrics] == ["warm_start"] * 2 + ["heldout"] + ["grpo"] * 2 + ["heldout"]
    assert all(m["valid_rollouts"] == 2 for m in metrics if m["phase"] == "heldout")  # the example's 2 held-out seeds
    assert json.loads((trained / "run.json").read_text())["env_id"] == stored.manifest.gym_id
    from safetensors.torch import load_file

    weights = load_file(trained / "adapter" / "adapter_model.safetensors")
    assert any(float(t.abs().sum()) > 0 for k, t in weights.items() if "lora_B" in k)  # the adapter moved

    menu = json.loads((run_dir / "route" / "menu.json").read_text())
    (option,) = menu["options"]
    assert option["capability"] == CAPABILITY and Path(option["adapter"]) == trained / "adapter"
    assert option["demo"]["gym_id"] == stored.manifest.gym_id and option["demo"]["reward"] >= 0.99
    decisions = [json.loads(line) for line in lines(run_dir / "route" / "decisions.jsonl")]
    assert len(decisions) == 5 and {d["choice"] for d in decisions} <= {CAPABILITY, None}

    results = json.loads((run_dir / "eval" / "results.json").read_text())
    assert [a["arm"] for a in results["arms"]] == ["base", f"adapter:{CAPABILITY}", "routed"]
    settings = json.loads((run_dir / "eval" / "eval.json").read_text())
    assert settings["model"] == json.loads((trained / "adapter" / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert list(settings["adapters"]) == [CAPABILITY]
    for arm in results["arms"]:
        assert sum(d["tasks"] for d in arm["domains"]) == 5
        for target in ("tau2-airline", "tau2-retail"):
            assert len(RolloutStore.load(Path(arm["folder"]) / target)) == {"tau2-airline": 3, "tau2-retail": 2}[target]
    base = RolloutStore.load(run_dir / "eval" / "arms" / "base" / "tau2-airline")
    adapted = RolloutStore.load(run_dir / "eval" / "arms" / f"adapter-{CAPABILITY}" / "tau2-airline")
    assert [t.messages for t in sorted(base, key=lambda t: t.task_id)] != [t.messages for t in sorted(adapted, key=lambda t: t.task_id)]
