"""τ² pass rates of an arm, per domain and overall, from the rollout summaries of its target runs.

Overall is the paper's definition: tasks solved over the union of the domains' tasks (per episode when
there are several trials), so a domain with more tasks weighs more; it is not the mean of the domain rates.
"""

from __future__ import annotations

from typing import Literal

from factory.evaluate.schema import ArmResult, DomainScore
from factory.rollout.summary import RolloutSummary


def domain_score(summary: RolloutSummary) -> DomainScore:
    return DomainScore(
        target=summary.target,
        tasks=summary.tasks,
        episodes=summary.episodes,
        passed=summary.passed,
        failed=summary.failed,
        errors=summary.errors,
        pass_rate=summary.pass_rate,
        pass_hat_k=summary.pass_hat_k,
        not_fully_judged=summary.not_fully_judged,
    )


def arm_result(
    arm: str, kind: Literal["base", "adapter", "routed"], policy: str, folder: str, summaries: list[RolloutSummary],
    adapter: str | None = None, routes: dict[str, int] | None = None,
) -> ArmResult:  # fmt: skip
    domains = [domain_score(s) for s in summaries]
    passed = sum(d.passed for d in domains)
    scored = sum(d.passed + d.failed for d in domains)
    return ArmResult(
        arm=arm, kind=kind, adapter=adapter, policy=policy, folder=folder, domains=domains, passed=passed, scored=scored,
        errors=sum(d.errors for d in domains), pass_rate=round(passed / scored, 4) if scored else None, routes=routes or {},
    )  # fmt: skip
