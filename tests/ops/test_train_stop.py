"""Training survives a stop (issue 23): SIGTERM after the first iteration checkpoints it and says how to resume;
``--resume`` keeps that iteration's metrics and goes on from the next one, and never silently restarts."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.ops.conftest import PROGRESS_LINE, put, run_factory, stop_when

pytest.importorskip("torch")
pytest.importorskip("peft")

SMALL = ["--groups", "1", "--group-size", "2", "--set", "rollout.max_new_tokens=8", "--set", "rollout.max_seq_len=1024",
         "--set", "threads=1", "--set", "warm_start.steps=0", "--set", "heldout.seeds=0", "--sandbox", "bwrap"]  # fmt: skip
# (no warm start and no held-out evaluation: the progress lines then count GRPO iterations only)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("registry")
    put(root)
    return root


def metrics(folder: Path) -> list[tuple[int, str]]:
    return [(row["iteration"], row["phase"]) for row in map(json.loads, (folder / "metrics.jsonl").read_text().splitlines())]


@pytest.mark.slow
def test_sigterm_after_the_first_iteration_then_resume_continues_from_the_next(tmp_path: Path, registry: Path, tiny_model: Path) -> None:
    out = tmp_path / "run"
    args = ["train", "tiny_cancel", "--model", str(tiny_model), "--iterations", "3", "--output", str(out), *SMALL]
    first_iteration = lambda line, seen: "train tiny_cancel-v0: 1/3" in line  # noqa: E731 - the piped progress line
    stopped, after = stop_when(args, first_iteration, signal.SIGTERM, TRACE_FACTORY_REGISTRY=str(registry))

    assert stopped.code == 143, stopped.stderr[-2000:]
    said = " ".join(stopped.lines)
    assert "stopped by SIGTERM" in said and f"run the same command with --resume (--output {out})" in said, said
    assert "Traceback" not in stopped.stderr
    progress = [line for line in stopped.stderr.splitlines() if PROGRESS_LINE.match(line)]
    assert progress and "1/3 (33%)" in progress[0] and "left" in progress[0]  # one line per iteration, with an ETA
    kept = metrics(out)
    assert kept[0] == (0, "grpo") and all(phase == "grpo" for _, phase in kept)
    checkpoints = sorted(p.name for p in (out / "checkpoints").iterdir() if not p.name.startswith("."))
    assert checkpoints and checkpoints[0] == "iter-000000"  # the first iteration is checkpointed
    done_before = max(i for i, _ in kept)
    row_zero = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])

    resumed = run_factory(*args, "--resume", "--json", TRACE_FACTORY_REGISTRY=str(registry))
    assert resumed.code == 0, resumed.stderr[-2000:]
    assert f"resuming the run in {out} from iteration {done_before + 1}" in resumed.stderr  # said, not silent
    assert metrics(out) == [(0, "grpo"), (1, "grpo"), (2, "grpo")]
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[0]) == row_zero  # that iteration's metrics are kept
    assert json.loads(resumed.stdout)["summary"]["iterations"] == 3
    counted = [line.split(": ")[1].split(" ")[0] for line in resumed.stderr.splitlines() if PROGRESS_LINE.match(line)]
    assert counted == [f"{i + 1}/3" for i in range(done_before + 1, 3)]  # the resumed run counts on from where it was
    assert (out / "adapter" / "adapter_config.json").is_file()
    assert after < 120  # it stopped at the next safe point, not after the whole run


@pytest.mark.slow
def test_ctrl_c_between_checkpoints_checkpoints_the_last_finished_iteration(tmp_path: Path, registry: Path, tiny_model: Path) -> None:
    """With a checkpoint due only every 20 iterations none exists when Ctrl-C comes: the stop writes the last one."""
    import re

    out = tmp_path / "run"
    args = ["train", "tiny_cancel", "--model", str(tiny_model), "--iterations", "20", "--output", str(out), "--set", "save_every=20", *SMALL]
    stopped, _ = stop_when(args, lambda line, seen: "train tiny_cancel-v0: 2/20" in line, signal.SIGINT,
                           TRACE_FACTORY_REGISTRY=str(registry))  # fmt: skip
    assert stopped.code == 130, stopped.stderr[-2000:]
    said = " ".join(stopped.lines)
    kept = re.search(r"stopped by Ctrl-C.*; iterations up to (\d+) are kept", said)
    assert kept, said
    last = int(kept.group(1))
    assert 1 <= last < 19 and f"go on from iteration {last + 1}" in said
    assert sorted(p.name for p in (out / "checkpoints").iterdir() if not p.name.startswith(".")) == [f"iter-{last:06d}"]
    assert metrics(out) == [(i, "grpo") for i in range(last + 1)]


def test_resume_never_silently_restarts(tmp_path: Path, registry: Path, tiny_model: Path) -> None:
    base = ["train", "tiny_cancel", "--model", str(tiny_model), *SMALL]
    nothing = run_factory(*base, "--output", str(tmp_path / "none"), "--resume", TRACE_FACTORY_REGISTRY=str(registry))
    assert nothing.code == 2 and "cannot resume" in nothing.lines[-1] and "without --resume" in nothing.lines[-1]
    assert not (tmp_path / "none").exists()

    used = tmp_path / "used"
    (used / "checkpoints" / "iter-000000").mkdir(parents=True)
    (used / "checkpoints" / "iter-000000" / "state.json").write_text(json.dumps({"iteration": 0, "order": [0], "env_id": "trace/other-v0"}))
    (used / "metrics.jsonl").write_text('{"iteration": 0}\n')
    other = run_factory(*base, "--output", str(used), "--resume", TRACE_FACTORY_REGISTRY=str(registry))
    assert other.code == 2 and "holds a run of trace/other-v0, not trace/tiny_cancel-v0" in other.lines[-1]
    fresh = run_factory(*base, "--output", str(used), TRACE_FACTORY_REGISTRY=str(registry))
    assert fresh.code == 2 and "already holds a run (last checkpoint iter-000000); pass --resume" in fresh.lines[-1]
    assert (used / "metrics.jsonl").read_text() == '{"iteration": 0}\n'  # nothing emptied


def test_checkpoint_clock_saves_every_iteration_on_small_runs_and_by_cost_on_big_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer import stop

    now = [0.0]
    monkeypatch.setattr(stop.time, "monotonic", lambda: now[0])
    clock = stop.CheckpointClock(None)
    saved = []
    for i in range(6):
        now[0] += 10.0  # an iteration of 10 s
        if clock.due(i, 6):
            with clock.saving():
                now[0] += 0.2  # a LoRA checkpoint written in 0.2 s: 2% of an iteration
            saved.append(i)
    assert saved == [0, 1, 2, 3, 4, 5]
    slow, saved = stop.CheckpointClock(None), []
    for i in range(6):
        now[0] += 10.0
        if slow.due(i, 6):
            with slow.saving():
                now[0] += 4.0  # 40% of an iteration: at most one checkpoint in ten times its cost
            saved.append(i)
    assert saved == [0, 4, 5] and stop.CheckpointClock(2).due(1, 6) and not stop.CheckpointClock(2).due(2, 6)


def test_a_first_signal_inside_a_finalizer_prints_no_traceback_and_still_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM that lands in a weakref callback (seen in a CI run: ThreadPoolExecutor's) cannot abandon the
    iteration from there: its report never reaches the hook that prints tracebacks, and the stop stays
    requested for the iteration's end."""
    import gc
    import signal as signals
    import sys

    from trainer.stop import StopSignal

    reported: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda report: reported.append(report.exc_value))

    class Finalized:
        def __del__(self) -> None:
            stop._handle(signals.SIGTERM, None)

    with StopSignal() as stop:
        Finalized()
        gc.collect()
        assert stop.requested and stop.signum == signals.SIGTERM
    assert reported == []
