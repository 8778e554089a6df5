"""How checks judge what the worker answered, on scripted answers (no sandbox): the GRPO signal on the env's
declared reward range, and the robustness memory verdict on a worker that grows. The reward arithmetic is
the real :class:`CheckContext`'s (``norm``, ``clipped``); only the worker is replaced."""

from __future__ import annotations

import random
from typing import Any

from factory.validation.checks import robust
from factory.validation.checks import signal as grpo
from factory.validation.checks.context import CheckContext
from schemas.validation import SeedSurvey, SolutionRun, ValidationConfig

SAY = {"content": "Done.", "calls": []}


def run(reward: float = 1.0, transcript: str = "the reference") -> SolutionRun:
    return SolutionRun(reward=reward, steps=1, reset_ms=0.0, transcript=transcript, turns=[SAY], pattern=["say"])


class Scripted(CheckContext):
    """The gate's context over scripted episodes: the k-th GRPO rollout of every seed gets ``group[k]`` and
    ``k + 1`` steps (so the length controls are the first and the last rollout); every filler episode gets
    ``filler``; ``memory`` answers a memory call."""

    def __init__(self, reward_range: tuple[float, float], group: list[float], config: ValidationConfig,
                 filler: float = 0.5, memory: dict[str, Any] | None = None) -> None:
        self.config = config
        self.low, self.high = reward_range
        self.rng = random.Random(0)
        self.seeds = list(range(config.grpo_seeds * 8))  # room for the sequential test to draw more
        self.group, self.filler, self.memory = group, filler, memory
        self.episodes_run = 0
        self.fresh_runs: dict[Any, Any] = {}

    def generated(self, count: int) -> list[SeedSurvey]:
        return [SeedSurvey(seed=s, reference=run(), skipping=run(0.0)) for s in self.seeds[:count]]

    def play_many(self, items: list[tuple[int, list[Any]]], templates: bool = False, where: str = "an episode",
                  **extra: Any) -> list[Any]:
        played: dict[int, int] = {}
        out = []
        for seed, _ in items:
            k = played[seed] = played.get(seed, -1) + 1
            reward = self.group[k % len(self.group)] if where.startswith("a GRPO") else self.filler
            out.append(run(reward))
            out[-1].steps = k + 1
        return out

    def call(self, method: str, params: dict[str, Any], timeout_s: float, seed: int | None = None,
             actions: list[Any] | None = None) -> Any:
        assert method == "memory" and self.memory is not None
        return self.memory


GRPO = dict(grpo_seeds=4, grpo_group_size=8, run_seed=1)


def grpo_signal(reward_range: tuple[float, float], group: list[float], **config: Any) -> Any:
    return grpo.check_grpo_signal(Scripted(reward_range, group, ValidationConfig(**{**GRPO, **config})))


def test_grpo_success_share_counts_negative_rewards_as_failures() -> None:
    """A [-1, 1] env whose mixture succeeds on half its rollouts and scores below zero on the rest: the
    negative rewards are shares of the range near 0, so half the rollouts succeed and the reward is not
    saturated. Dropping the negatives (the old gate) left only the successes: 100%, rejected as saturated."""
    result = grpo_signal((-1.0, 1.0), [1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -0.5, -0.2])
    assert result.passed, (result.figure, result.message)
    # 4/4 informative groups cannot show a share of at least 0.5 at the gate's error rate: it draws 4 seeds more
    assert "50% of rollouts succeed" in result.figure and "8/8 informative" in result.figure
    assert "informative group share 1.00 [0.58, 1.00] against at least 0.50" in result.figure


def test_grpo_clips_a_reward_below_the_range_instead_of_dropping_it() -> None:
    """A reward below the declared range is reward_bounds' finding; here it counts as the lowest share (0),
    as a trainer clips it: 6 successes in 8 stay 75%, under a 80% limit. Dropped, it made 6 in 6."""
    result = grpo_signal((-1.0, 1.0), [1.0] * 6 + [-3.0, -3.0], grpo_max_success_share=0.8)
    assert result.passed, (result.figure, result.message)
    assert "75% of rollouts succeed" in result.figure


def test_grpo_spread_is_measured_in_shares_of_the_declared_range() -> None:
    """Rewards that differ only below zero (-1 against -0.6: a fifth of the range) spread, so every group is
    informative; clipped to [0, 1] without rescaling they all read 0 and no group would be."""
    result = grpo_signal((-1.0, 1.0), [-1.0, -0.6] * 4)
    assert result.passed, (result.figure, result.message)
    assert "8/8 informative" in result.figure and "0% of rollouts succeed" in result.figure
    saturated = grpo_signal((-1.0, 1.0), [1.0] * 7 + [-1.0])  # and a reward saturated on that range still fails
    assert not saturated.passed and "saturated" in saturated.message


def memory_verdict(growth_bytes: float, rss_mb: float = 60.0) -> tuple[str, Any]:
    rows = [SeedSurvey(seed=s, reference=run(transcript=f"seed {s}"), skipping=run(0.0)) for s in range(robust.MEMORY_SLOTS)]
    rounds = 2 * robust.MEMORY_ROUNDS
    answer = {"rss_before_mb": 50.0, "rss_after_mb": rss_mb, "episodes": rounds * len(rows),
              "growth_bytes_per_episode": growth_bytes, "transcripts": [[f"seed {r.seed}"] * rounds for r in rows]}
    ctx = Scripted((0.0, 1.0), [1.0], ValidationConfig(run_seed=1), memory=answer)
    return robust._memory(ctx, rows)


def test_robustness_rejects_a_worker_that_keeps_memory_every_episode() -> None:
    """A worker that keeps 20 kB an episode (the same transcripts every time: no state the agent can see)
    is over the 512 MB budget within a training run (100,000 episodes: ~1.9 GB); 2 kB an episode (~190 MB)
    and a worker already over the budget now are judged on those figures."""
    figure, problem = memory_verdict(20_000)
    assert problem is not None and "projected" in problem[0] and "budget" in problem[0], figure
    assert problem[1].seed == 0 and problem[1].actions and "20000 bytes" in problem[1].detail
    assert memory_verdict(2_000)[1] is None
    assert memory_verdict(0, rss_mb=600)[1] is not None


def test_grpo_signal_on_the_line_is_inconclusive_with_its_interval_and_a_rerun_line() -> None:
    """Half the groups flat, half spread (by seed parity), at a 0.5 threshold: whatever the number of seeds the
    share's interval straddles the line, so the verdict is inconclusive, never a coin flip, after the most seeds
    the check may draw (four times twice the first draw: 4, 8, 16, 32)."""

    class Parity(Scripted):
        def play_many(self, items: list[tuple[int, list[Any]]], templates: bool = False, where: str = "an episode",
                      **extra: Any) -> list[Any]:
            out = super().play_many(items, templates, where, **extra)
            for (seed, _), result in zip(items, out):
                if where.startswith("a GRPO") and seed % 2:
                    result.reward = 0.0
            return out

    result = grpo.check_grpo_signal(Parity((0.0, 1.0), [1.0, 0.0] * 4, ValidationConfig(**GRPO)))
    assert not result.passed and result.inconclusive, (result.figure, result.message)
    assert result.seeds == 32 and result.intervals["informative groups"]["outcome"] == "inconclusive"
    assert result.message.startswith("inconclusive: informative groups: informative group share 0.50 [")
    assert result.message.endswith("against at least 0.50 after 32 seeds; rerun with --set grpo_seeds=20")
