"""Learning, shown on CPU: the tiny model learns the one tool call the wifi env rewards.

The raw tiny model never writes a well-formed call (reward 0, every group zero-variance: GRPO has nothing
to learn from), so a short supervised warm start on the env's reference solutions comes first; it is
kept short enough that the policy still almost always fails. From there GRPO alone must take the mean
reward to at least 0.8 over the last 10 iterations, and at least 0.4 above where it started. The curve
is asserted, not the time; it is printed, and the run's curve.png is written like any other run's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.config import load_config
from trainer.loop import GRPORun
from trainer.report import tail_mean

SETTINGS = [
    "threads=2", "sandbox='bwrap'", "grpo.groups=4", "grpo.group_size=8", "grpo.lr=1e-3",
    "grpo.micro_batch_size=8", "rollout.max_new_tokens=24", "rollout.max_seq_len=1024", "warm_start.steps=10",
    "warm_start.lr=5e-3", "save_every=100",
]
ITERATIONS = 50


@pytest.mark.learning
@pytest.mark.slow
def test_grpo_takes_the_tiny_model_from_near_zero_to_the_tool_call(tmp_path: Path, wifi_env: str, learnable_model: Path) -> None:
    config = load_config(None, SETTINGS, model=str(learnable_model), output_dir=str(tmp_path / "run"), **{"grpo.iterations": ITERATIONS})
    run = GRPORun(wifi_env, config)
    result = run.train()
    curve = [r.reward_mean for r in run.rows if r.phase == "grpo"]
    print("reward curve:", " ".join(f"{r:.2f}" for r in curve))  # the figures behind the claim, in the test log
    assert len(curve) == ITERATIONS and all(r is not None for r in curve)
    start = sum(curve[:3]) / 3
    assert start <= 0.3, f"the warm start alone already solves the task (first iterations {curve[:3]})"
    end = tail_mean(run.rows, 10)
    assert end is not None and end >= 0.8 and end >= start + 0.4, f"GRPO did not learn the call: {curve}"
    trained = [r.trained_rollouts for r in run.rows if r.phase == "grpo"]
    assert sum(1 for t in trained if t > 0) >= ITERATIONS // 2  # updates really happened, on most iterations
    assert result.curve and Path(result.curve).exists()
