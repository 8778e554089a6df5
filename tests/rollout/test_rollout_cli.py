"""`factory rollout`: JSON summary, Trajectory JSONL that `factory analyze` reads as is, resume, faults, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from factory.cli import app
from factory.rollout.engine import Rollout, RolloutConfig
from factory.rollout.policies import GoldPolicy, Policy
from factory.rollout.store import RolloutStore
from schemas.trajectory import Trajectory
from tests.targets.helpers import requires_servers, server_command

pytestmark = requires_servers
META_KEYS = {"trial", "termination_reason", "reward_detail", "task_version"}


def factory(*args: str) -> Any:
    """The real ``factory`` app in process (CliRunner keeps stdout and stderr apart)."""
    return CliRunner().invoke(app, list(args))


def test_json_summary_and_trajectories_that_analyze_reads(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = factory("rollout", "--target", "tau2-retail", "--task-ids", "0,1", "--task-ids", "5", "--policy", "scripted:gold", "--trials", "2", "--backend", "mcp", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert {k: summary[k] for k in ("tasks", "trials", "episodes", "passed", "pass_rate", "errors")} == {
        "tasks": 3, "trials": 2, "episodes": 6, "passed": 6, "pass_rate": 1.0, "errors": 0,
    }  # fmt: skip
    assert summary["pass_hat_k"] == {"1": 1.0, "2": 1.0} and summary["mean_reward"] == 1.0
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    trajectories = [Trajectory.model_validate_json(line) for line in lines]
    assert sorted(t.id for t in trajectories) == ["0#0", "0#1", "1#0", "1#1", "5#0", "5#1"]
    for t in trajectories:
        assert META_KEYS <= set(t.metadata) and "infrastructure_error" not in t.metadata
        assert t.target == "tau2-retail" and t.source == "rollout" and t.metadata["termination_reason"] == "user_stop"
        assert isinstance(t.metadata["gold_actions"], list) and t.messages[0].role == "system"
    analysis = factory("analyze", str(out / "trajectories.jsonl"), "--out", str(tmp_path / "analysis"), "--runs", "1", "--bootstrap", "0", "--json")
    assert analysis.exit_code == 0, analysis.output
    assert json.loads(analysis.stdout)["n_trajectories"] == 6


def test_help_has_examples() -> None:
    result = factory("rollout", "--help")
    assert result.exit_code == 0 and "factory rollout --target tau2-airline --policy scripted:gold" in result.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["--target", "tau3", "--policy", "scripted:gold"], "unknown target 'tau3'"),
        (["--target", "tau2-airline", "--policy", "scripted:gold", "--task-ids", "999"], "unknown task id(s) '999'"),
        (["--target", "tau2-airline", "--policy", "scripted:perfect"], "unknown scripted policy"),
        (["--target", "mcp", "--policy", "scripted:gold"], "needs a server"),
        (["--target", "tau2-airline", "--policy", "hf:/no/such/model"], "--policy hf:/no/such/model: no such folder"),
    ],
)
def test_bad_input_gets_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = factory("rollout", *args, "--out", str(tmp_path / "x"))
    assert result.exit_code == 2 and message in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 2


class KillingPolicy(Policy):
    """Gold, except that it kills the server under one episode after that episode's first tool call."""

    spec = "scripted:gold"

    def __init__(self, victim: str, pid_dir: Path) -> None:
        self.gold = GoldPolicy()
        self.victim = victim
        self.pid_dir = pid_dir

    def start(self, task, tools, seed):  # type: ignore[no-untyped-def]
        act = self.gold.start(task, tools, seed)

        def killing(messages: list[dict[str, Any]]) -> Any:
            if task.id == self.victim and sum(m["role"] == "tool" for m in messages) == 1:
                newest = max(self.pid_dir.iterdir(), key=lambda p: p.stat().st_mtime)
                os.kill(int(newest.read_text()), signal.SIGKILL)
            return act(messages)

        return killing


def test_server_killed_mid_episode_is_recorded_and_the_run_finishes_then_resumes(tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    wrapper = tmp_path / "server.sh"
    wrapper.write_text(f"#!/bin/sh\nexec {server_command('airline', pid_file=pid_dir / '$$')}\n")  # $$: the proxy's pid after exec
    wrapper.chmod(0o755)
    config = RolloutConfig(target="tau2-airline", task_ids=["0", "4", "7"], policy="scripted:gold", out=tmp_path / "run", concurrency=1, server=str(wrapper))
    summary = Rollout(config, policy=KillingPolicy("4", pid_dir)).run()
    assert (summary.episodes, summary.passed, summary.errors, summary.error_kinds) == (3, 2, 1, {"infrastructure": 1})
    assert summary.pass_rate == 1.0  # the killed episode is an error, not a failure of the agent
    assert summary.error_examples[0].task_id == "4" and "died during call_tool" in summary.error_examples[0].message
    killed = next(t for t in RolloutStore.load(config.out) if t.task_id == "4")
    assert killed.metadata["termination_reason"] == "infrastructure_error" and not killed.success
    assert "died during call_tool" in killed.metadata["infrastructure_error"] and killed.messages[-1].role == "assistant"
    before = {t.id: t.metadata["duration_s"] for t in RolloutStore.load(config.out) if t.task_id != "4"}

    again = Rollout(config, policy=GoldPolicy()).run()  # resume: only the errored episode runs again
    assert (again.resumed, again.ran, again.passed, again.errors) == (2, 1, 3, 0)
    after = RolloutStore.load(config.out)
    assert len(after) == 3 and {t.id: t.metadata["duration_s"] for t in after if t.task_id != "4"} == before


def test_resume_skips_finished_episodes_and_drops_a_torn_last_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = RolloutConfig(target="tau2-retail", backend="mcp", task_ids=["0", "1"], policy="scripted:empty", out=out, trials=1)
    first = Rollout(config).run()
    assert first.ran == 2
    path = out / "trajectories.jsonl"
    path.write_text(path.read_text() + '{"id": "1#1", "target": "tau2-re')  # a write cut short by a crash
    second = Rollout(config.model_copy(update={"trials": 2})).run()
    assert (second.resumed, second.ran, second.episodes) == (2, 2, 4)
    assert sorted(t.id for t in RolloutStore.load(out)) == ["0#0", "0#1", "1#0", "1#1"]
    with pytest.raises(Exception, match="holds a run with other settings .*policy 'scripted:empty' -> 'scripted:gold'"):
        Rollout(config.model_copy(update={"policy": "scripted:gold"})).run()
    lines = path.read_text().splitlines()
    path.write_text("\n".join(["not json", *lines]) + "\n")
    with pytest.raises(Exception, match=r"line 1 is damaged \(\(top level\): Invalid JSON"):
        Rollout(config).run()


def test_an_interrupt_right_after_a_write_still_counts_that_episode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C or SIGTERM can land between an episode's line reaching the file and the run's bookkeeping; the
    summary must still agree with the file a resume reads (it once said 1 episode with 2 on disk)."""
    write = RolloutStore.append
    calls = []

    def write_then_interrupt(self: RolloutStore, trajectory: Trajectory) -> None:
        write(self, trajectory)
        calls.append(trajectory.task_id)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(RolloutStore, "append", write_then_interrupt)
    config = RolloutConfig(target="tau2-retail", backend="mcp", task_ids=["0", "1", "2", "3"], policy="scripted:gold", out=tmp_path / "run", concurrency=1)
    summary = Rollout(config).run()
    assert summary.interrupted and (summary.episodes, summary.ran) == (2, 2) == (len(RolloutStore.load(config.out)), len(calls))


def test_trajectories_with_unicode_line_separators_resume_as_one_line_each(tmp_path: Path) -> None:
    config = RolloutConfig(target="tau2-retail", backend="mcp", task_ids=["0", "1"], policy="scripted:empty", out=tmp_path / "run")
    assert Rollout(config).run().ran == 2
    path = config.out / "trajectories.jsonl"
    stored = RolloutStore.load(config.out)
    odd = stored[0].model_copy(update={"messages": [*stored[0].messages[:-1], stored[0].messages[-1].model_copy(update={"content": "a\u2028b\x85c\x1cd"})]})
    path.write_text(odd.model_dump_json(exclude_none=True) + "\n" + stored[1].model_dump_json(exclude_none=True) + "\n", encoding="utf-8")
    again = Rollout(config).run()  # str.splitlines would cut the first record in three and refuse the file
    assert (again.resumed, again.ran) == (2, 0)
    assert RolloutStore.load(config.out)[0].messages[-1].content == "a\u2028b\x85c\x1cd"


def test_sigterm_stops_the_run_and_keeps_finished_episodes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["rollout", "--target", "tau2-retail", "--backend", "mcp", "--policy", "scripted:gold", "--out", str(out), "--concurrency", "1", "--json"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    process = subprocess.Popen([sys.executable, "-m", "factory.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    path = out / "trajectories.jsonl"
    stopped = threading.Event()

    def stop_after_two() -> None:
        while not stopped.is_set():
            if path.exists() and path.read_text().count("\n") >= 2:  # two complete lines, not one and a torn one
                process.send_signal(signal.SIGTERM)
                return
            stopped.wait(0.2)

    watcher = threading.Thread(target=stop_after_two)
    watcher.start()
    try:
        stdout, stderr = process.communicate(timeout=300)
    finally:
        stopped.set()
        watcher.join()
    assert process.returncode == 143, stderr  # 128 + SIGTERM: the contract says which signal stopped it
    summary = json.loads(stdout)
    assert summary["interrupted"] is True and 2 <= summary["episodes"] < 114
    assert len(RolloutStore.load(out)) == summary["episodes"] and not (out / ".rollout.lock").exists()
