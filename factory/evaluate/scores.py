"""Scores of an arm per target: τ² pass rates per domain and overall, and ToolSandbox's mean similarity and
perfect count with intervals, from the rollout summaries (and, for the intervals, the trajectories).

The τ² overall is the paper's definition: tasks solved over the union of the τ² domains' tasks (per episode
when there are several trials), so a domain with more tasks weighs more; it is not the mean of the domain
rates, and ToolSandbox, graded on another scale, stays out of it.

ToolSandbox's intervals: a percentile bootstrap of the mean similarity (2,000 resamples, seed 0: scenario
similarities are bounded and skewed, so no normal approximation), and a Wilson score interval of the
perfect rate; both 95%.
"""

from __future__ import annotations

import math
from typing import Literal

from factory.evaluate.schema import TOOLSANDBOX, ArmResult, DomainScore
from factory.rollout.store import error_of
from factory.rollout.summary import RolloutSummary
from schemas.trajectory import Trajectory

Z95 = 1.959963984540054
BOOTSTRAP_SAMPLES = 2000


def wilson(successes: int, n: int, z: float = Z95) -> list[float] | None:
    """Wilson score interval of a proportion; None without observations."""
    if n <= 0:
        return None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def bootstrap_mean(values: list[float], samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> list[float] | None:
    """95% percentile bootstrap interval of the mean; None without observations."""
    if not values:
        return None
    import numpy as np

    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(samples, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return [round(float(low), 4), round(float(high), 4)]


def domain_score(summary: RolloutSummary, trajectories: list[Trajectory] | None = None) -> DomainScore:
    score = DomainScore(
        target=summary.target,
        tasks=summary.tasks,
        episodes=summary.episodes,
        passed=summary.passed,
        failed=summary.failed,
        errors=summary.errors,
        pass_rate=summary.pass_rate,
        pass_hat_k=summary.pass_hat_k,
        not_fully_judged=summary.not_fully_judged,
        skipped=summary.skipped,
    )
    if summary.target == TOOLSANDBOX:
        scored = [t.reward for t in trajectories or [] if error_of(t) is None]
        score.mean_similarity = summary.mean_reward
        score.similarity_ci = bootstrap_mean(scored)
        score.perfect_ci = wilson(summary.passed, summary.passed + summary.failed)
    return score


def arm_result(
    arm: str, kind: Literal["base", "adapter", "routed"], policy: str, folder: str, summaries: list[RolloutSummary],
    adapter: str | None = None, routes: dict[str, int] | None = None, trajectories: dict[str, list[Trajectory]] | None = None,
) -> ArmResult:  # fmt: skip
    domains = [domain_score(s, (trajectories or {}).get(s.target)) for s in summaries]
    tau2 = [d for d in domains if d.target != TOOLSANDBOX]
    passed = sum(d.passed for d in tau2)
    scored = sum(d.passed + d.failed for d in tau2)
    return ArmResult(
        arm=arm, kind=kind, adapter=adapter, policy=policy, folder=folder, domains=domains, passed=passed, scored=scored,
        errors=sum(d.errors for d in domains), pass_rate=round(passed / scored, 4) if scored else None, routes=routes or {},
    )  # fmt: skip
