"""Host side: which episodes a supervised warm start learns from (``warm_start.source``).

A warm start that plays the env's reference solution shows the policy the very behaviour GRPO is then said
to teach; a held-out gain after it is partly imitation. The sources:

* ``reference``: the env's reference solution on a ``reference_share`` of the seeds, its capability-skipping
  solution on the rest (the demonstrating warm start; report it apart);
* ``skipping``: only the env's capability-skipping solution (the tools, the call format and the domain, never
  the capability: it skips exactly the step the capability is about), whatever its reward;
* ``other``: on a ``reference_share`` of the seeds the reference solution of one of the OTHER registered
  capabilities whose env has the same target (the same tool domain: how a good episode there looks, not this
  capability), round robin; this env's capability-skipping solution on the rest.

Reference episodes are kept only when they reach the success reward of their own env; skipping ones always.
Env code runs in each env's sandbox (``EnvPool``); only checked messages come back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from trainer.errors import TrainError

if TYPE_CHECKING:
    from trainer.envpool import EnvPool

Source = Literal["reference", "skipping", "other"]


@dataclass(frozen=True)
class Planned:
    """One warm-start episode: which env plays which solution from which seed."""

    seed: int
    policy: Literal["reference", "skipping"]
    env_id: str


def capability_of(env_id: str) -> str:
    """``trace/permission_error_recovery-v0`` -> ``permission_error_recovery``."""
    return env_id.removeprefix("trace/").rsplit("-v", 1)[0]


def other_capability_envs(env_id: str, registry: Any = None) -> list[str]:
    """Gym ids of the newest verified version of every other capability registered with ``env_id``'s target,
    sorted by capability (deterministic). Empty when there is none."""
    from env_registry.registry import Registry

    manifests = (registry or Registry()).manifests()
    own = capability_of(env_id)
    targets = {m.target for m in manifests if m.capability == own}
    if not targets:
        raise TrainError(f"{env_id}: not in the registry, so its target (and the other capabilities on it) is unknown")
    newest: dict[str, Any] = {}
    for m in manifests:
        if m.capability != own and m.target in targets and (m.capability not in newest or m.version > newest[m.capability].version):
            newest[m.capability] = m
    return [newest[name].gym_id for name in sorted(newest)]


def plan(source: Source, share: float, seeds: list[int], env_id: str, others: list[str] | None = None) -> list[Planned]:
    """The episodes, in seed order. Seed j is in the reference share when the running count of such seeds steps
    up at j (evenly spread, as before)."""
    if source == "other" and not others:
        raise TrainError(f"warm_start.source = 'other': no other capability is registered on {env_id}'s target; "
                         "build one (`factory build`) or use warm_start.source = 'skipping'")
    planned, shown = [], 0
    for j, seed in enumerate(seeds):
        in_share = int((j + 1) * share) > int(j * share)
        if source == "reference" and in_share:
            planned.append(Planned(seed, "reference", env_id))
        elif source == "other" and in_share:
            assert others
            planned.append(Planned(seed, "reference", others[shown % len(others)]))
            shown += 1
        else:
            planned.append(Planned(seed, "skipping", env_id))
    return planned


def play(planned: list[Planned], pool: "EnvPool", success_share: float, sandbox: str | None = None) -> list[dict[str, Any]]:
    """Play the planned episodes (``pool`` is the target env's; other envs get a pool each, closed after) and
    return the kept ones: messages, tools, reward and ``env_id``."""
    from trainer.envpool import EnvPool

    pools: dict[str, EnvPool] = {pool.env_id: pool}
    kept: list[dict[str, Any]] = []
    try:
        for item in planned:
            if item.env_id not in pools:
                pools[item.env_id] = EnvPool(item.env_id, sandbox=sandbox, workers=1)
            source = pools[item.env_id]
            played = source.reference_episode(item.seed, item.policy)
            # the env's reward range is known once it has answered, so success is judged after each episode
            if item.policy == "skipping" or played["reward"] >= source.success_at(success_share):
                kept.append({**played, "env_id": item.env_id, "policy": item.policy})
    finally:
        for env_id, other in pools.items():
            if env_id != pool.env_id:
                other.close()
    return kept


def warm_episodes(config: Any, env_id: str, pool: "EnvPool", seeds: list[int], rank: int = 0, ranks: int = 1) -> list[dict[str, Any]]:
    """The kept episodes of ``config.warm_start`` on the warm-start ``seeds``; rank r plays episodes r, r + ranks, ..."""
    w = config.warm_start
    others = other_capability_envs(env_id) if w.source == "other" else None
    planned = plan(w.source, w.reference_share, seeds, env_id, others)[rank::ranks]
    return play(planned, pool, config.rollout.success_reward, config.sandbox)
