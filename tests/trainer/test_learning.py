"""Learning, shown on CPU and judged on held-out seeds: the tiny model learns the one tool call the wifi env
rewards, the same seeds give the same curve, and a busy machine changes nothing.

The raw tiny model never writes a well-formed call (reward 0, every group zero-variance: GRPO has nothing
to learn from), so a short supervised warm start on the env's reference solutions comes first; it is
kept short enough that the policy still almost always fails. From there GRPO alone must take the training
reward to at least 0.6 over the last 10 of 50 iterations, at least 0.35 above the first 3, and the reward on
8 held-out seeds (never trained on; 4 samples each at the training temperature, since greedy decoding of
the warm-started model already picks the call on about 5 of 8 seeds) from at most 0.4 to at least 0.45 and
at least 0.3 above where it started.

Here (2 cores, CPU torch 2.13, one thread) the curve is: first 3 iterations 0.24, last 10 0.74, held-out
0.16 [0.06, 0.28] -> 0.63 [0.41, 0.84]; the same figures on every run, on an idle or a busy machine (the
issue's 0.74 on an idle machine is this curve). Other CPUs round differently and draw another curve (the
team saw 0.86-0.89 over the last 10 elsewhere), hence the margins rather than the figures.

The run is deterministic: the same seeds replayed for its first iterations, this time with two CPU hogs
beside the trainer (a busy machine), must give the same rewards, losses and token counts, bit for bit,
with no infrastructure errors. One torch thread: on a busy machine a second thread spin-waits for the
first (an iteration took 100-290 s with two threads, 11-40 s with one, same numbers). The curve is
asserted, not the time; it is printed, and the run's reward_curve.png is written like any other run's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainer.config import load_config
from trainer.loop import GRPORun
from trainer.report import tail_mean

SETTINGS = [
    "threads=1", "sandbox='bwrap'", "grpo.groups=4", "grpo.group_size=8", "grpo.lr=1e-3",
    "grpo.micro_batch_size=8", "rollout.max_new_tokens=24", "rollout.max_seq_len=1024", "warm_start.steps=10",
    "warm_start.lr=5e-3", "save_every=100", "heldout.seeds=8", "heldout.samples=4", "heldout.temperature=1.0",
    "heldout.every=25",
]
ITERATIONS = 50
REPLAYED = 4


def run(folder: Path, env_id: str, model: Path, iterations: int) -> GRPORun:
    config = load_config(None, SETTINGS, model=str(model), output_dir=str(folder), **{"grpo.iterations": iterations})
    trainer = GRPORun(env_id, config)
    trainer.result = trainer.train()  # type: ignore[attr-defined]
    return trainer


def fingerprint(trainer: GRPORun, iterations: int) -> list[tuple]:
    rows = [r for r in trainer.rows if r.phase == "warm_start" or (r.phase != "heldout" and r.iteration < iterations)
            or (r.phase == "heldout" and r.iteration == 0)]
    return [(r.phase, r.iteration, r.reward_mean, r.loss, r.generated_tokens, r.trained_rollouts, r.valid_rollouts) for r in rows]


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory, wifi_env: str, learnable_model: Path) -> GRPORun:
    return run(tmp_path_factory.mktemp("learning") / "run", wifi_env, learnable_model, ITERATIONS)


@pytest.mark.learning
@pytest.mark.slow
def test_grpo_takes_the_tiny_model_from_near_zero_to_the_tool_call_on_held_out_seeds(learned: GRPORun) -> None:
    grpo = [r for r in learned.rows if r.phase == "grpo"]
    curve = [r.reward_mean for r in grpo]
    held = [r for r in learned.rows if r.phase == "heldout"]
    print("reward curve:", " ".join(f"{r:.2f}" for r in curve))  # the figures behind the claim, in the test log
    print("held-out:", [(r.iteration, r.reward_mean, r.reward_low, r.reward_high) for r in held])
    assert len(curve) == ITERATIONS and all(r is not None for r in curve)
    assert all(r.valid_rollouts == r.rollouts == 32 for r in grpo)  # every mean stands on the whole batch
    start = sum(curve[:3]) / 3
    assert start <= 0.3, f"the warm start alone already solves the task (first iterations {curve[:3]})"
    end = tail_mean(learned.rows, 10)
    assert end is not None and end >= 0.6 and end >= start + 0.35, f"GRPO did not learn the call: {curve}"
    trained = [r.trained_rollouts for r in grpo]
    assert sum(1 for t in trained if t > 0) >= ITERATIONS // 2  # updates really happened, on most iterations
    assert [r.iteration for r in held] == [0, 25, 50] and all(r.valid_rollouts == 32 for r in held)
    assert held[0].reward_mean is not None and held[-1].reward_mean is not None
    first, last = held[0].reward_mean, held[-1].reward_mean
    assert first <= 0.4 and last >= 0.45 and last >= first + 0.3, f"no gain on held-out seeds: {held}"
    assert learned.result.curve and Path(learned.result.curve).exists()  # type: ignore[attr-defined]


@pytest.mark.learning
@pytest.mark.slow
def test_the_same_seeds_give_the_same_curve_on_a_busy_machine(learned: GRPORun, tmp_path: Path, wifi_env: str,
                                                                learnable_model: Path) -> None:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        again = run(tmp_path / "again", wifi_env, learnable_model, REPLAYED)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert fingerprint(again, REPLAYED) == fingerprint(learned, REPLAYED)
    assert all(r.infrastructure_errors == 0 and not r.incomplete for r in again.rows if r.phase == "grpo")
