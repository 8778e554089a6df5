"""The numbers of a rollout: pass rate, mean reward, τ²'s pass^k, errors, and what could not be judged.

Episodes that ended in an error (the target or simulated user failed, the policy could not run) are
counted as errors, not as failures, and are left out of the pass rate and mean reward: they measure the
machinery, not the agent. An episode whose reward basis had parts that could not be checked (NL
assertions without a judge) counts by the parts that were checked and is counted again under
``not_fully_judged``, so no such pass hides in the totals.
"""

from __future__ import annotations

from collections import defaultdict
from math import comb
from typing import Any

from pydantic import BaseModel, Field

from factory.rollout.store import error_of
from schemas.trajectory import Trajectory


class EpisodeError(BaseModel):
    task_id: str
    trial: int
    kind: str
    message: str


class RolloutSummary(BaseModel):
    target: str
    policy: str
    user: str
    judge: str | None = None
    out: str
    tasks: int
    trials: int
    episodes: int
    passed: int
    failed: int
    errors: int
    pass_rate: float | None = Field(description="passed / (episodes - errors); None when nothing was scored")
    mean_reward: float | None
    pass_hat_k: dict[str, float] = Field(default_factory=dict, description="τ²'s pass^k over tasks with all trials scored")
    not_fully_judged: int = 0
    not_judged_parts: dict[str, int] = Field(default_factory=dict)
    error_kinds: dict[str, int] = Field(default_factory=dict)
    error_examples: list[EpisodeError] = Field(default_factory=list)
    gold_errors: dict[str, list[str]] = Field(default_factory=dict, description="tasks whose own gold actions return errors")
    skipped: dict[str, int] = Field(default_factory=dict, description="tasks left out because they cannot run here, by reason")
    resumed: int = 0
    ran: int = 0
    interrupted: bool = False
    duration_s: float = 0.0


def summarise(
    trajectories: list[Trajectory], *, trials: int, tasks: int, header: dict[str, Any], resumed: int = 0, ran: int = 0
) -> RolloutSummary:
    scored = [t for t in trajectories if error_of(t) is None]
    errored = [t for t in trajectories if error_of(t) is not None]
    passed = [t for t in scored if t.success]
    kinds: dict[str, int] = defaultdict(int)
    examples = []
    for t in errored:
        kind, message = error_of(t)  # type: ignore[misc]
        kinds[kind] += 1
        if len(examples) < 10:
            examples.append(EpisodeError(task_id=t.task_id, trial=int(t.metadata.get("trial", 0)), kind=kind, message=message[:300]))
    parts: dict[str, int] = defaultdict(int)
    partial = 0
    gold_errors: dict[str, list[str]] = {}
    for t in scored:
        detail = t.metadata.get("reward_detail") or {}
        missing = detail.get("not_judged") or {}
        partial += bool(missing)
        for part in missing:
            parts[part] += 1
        bad_gold = ((detail.get("db") or {}).get("gold_errors")) or []
        if bad_gold:
            gold_errors[t.task_id] = [f"{e.get('name')}: {e.get('error')}" for e in bad_gold]
    per_task: dict[str, list[bool]] = defaultdict(list)
    for t in scored:
        per_task[t.task_id].append(t.success)
    pass_hat_k = {}
    for k in range(1, trials + 1):
        complete = [runs for runs in per_task.values() if len(runs) >= trials]
        if complete:
            pass_hat_k[str(k)] = round(sum(comb(sum(r), k) / comb(len(r), k) for r in complete) / len(complete), 4)
    return RolloutSummary(
        **header,
        tasks=tasks,
        trials=trials,
        episodes=len(trajectories),
        passed=len(passed),
        failed=len(scored) - len(passed),
        errors=len(errored),
        pass_rate=round(len(passed) / len(scored), 4) if scored else None,
        mean_reward=round(sum(t.reward for t in scored) / len(scored), 4) if scored else None,
        pass_hat_k=pass_hat_k,
        not_fully_judged=partial,
        not_judged_parts=dict(parts),
        error_kinds=dict(kinds),
        error_examples=examples,
        gold_errors=dict(sorted(gold_errors.items(), key=lambda kv: (len(kv[0]), kv[0]))),
        resumed=resumed,
        ran=ran,
    )

