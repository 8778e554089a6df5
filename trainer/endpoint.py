"""Host side: roll out any OpenAI-compatible endpoint as the policy, without training.

Same envs, same pool, same turn loop as training rollouts - each turn, every live episode's request is in
flight at once (the server batches them) - but text in, text out: the model is whatever the endpoint
serves (vLLM, SGLang, Ollama, a hosted API). The episodes come back as the project's trajectory records,
ready for ``factory analyze`` or for comparing a trained adapter served by vLLM with its base model.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from llm_clients import LLMClient, LLMError
from env_registry.policy import PolicyContext, llm_policy
from schemas.trajectory import Trajectory
from trainer.config import RolloutSettings
from trainer.envpool import EnvPool
from trainer.rollout import termination_reason


def collect_with_endpoint(
    pool: EnvPool, client: LLMClient, seeds: list[int], group_size: int, settings: RolloutSettings, concurrency: int = 16
) -> list[Trajectory]:
    """``group_size`` episodes per seed with the endpoint's model as the agent; one record per episode."""
    act = llm_policy(client, temperature=settings.temperature, max_tokens=settings.max_new_tokens)
    n = len(seeds) * group_size
    first = pool.reset(list(range(n)), [seeds[i // group_size] for i in range(n)])
    episodes: list[dict[str, Any]] = []
    for i, outcome in enumerate(first):
        episode: dict[str, Any] = {"seed": seeds[i // group_size], "trial": i % group_size, "reward": 0.0, "detail": {}}
        if outcome.reply is None:
            episode.update(termination="infrastructure_error", error=outcome.error, messages=[], tools=[])
        else:
            reply = outcome.reply
            episode.update(messages=reply.messages, tools=reply.tools, termination=None, steps=0,
                           task_version=reply.scenario_hash, capability=reply.capability, target=reply.target)
        episodes.append(episode)
    live = [i for i, e in enumerate(episodes) if e["termination"] is None]
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, n))) as threads:
        while live:

            def ask(i: int) -> Any:
                e = episodes[i]
                try:
                    return act(e["messages"], e["tools"], PolicyContext(seed=e["seed"], rollout=e["trial"], step=e["steps"]))
                except LLMError as exc:
                    return exc

            actions = list(threads.map(ask, live))
            failed = [i for i, a in zip(live, actions) if isinstance(a, LLMError)]
            for i, action in zip(live, actions):
                if isinstance(action, LLMError):
                    episodes[i].update(termination="infrastructure_error", error=f"policy endpoint: {action}")
            live = [i for i in live if i not in failed]
            actions = [a for a in actions if not isinstance(a, LLMError)]
            outcomes = pool.step(live, actions)
            for i, outcome in zip(live, outcomes):
                e = episodes[i]
                e["steps"] += 1
                reply = outcome.reply
                if reply is None:
                    e.update(termination="infrastructure_error", error=outcome.error)
                    continue
                e["messages"] = e["messages"] + [reply.assistant_message or {"role": "assistant", "content": ""}] + reply.new_messages
                if reply.terminated or reply.truncated:
                    e.update(termination=termination_reason(reply.ended_by, reply.truncated), reward=reply.reward,
                             detail=reply.reward_components, messages=reply.messages or e["messages"])
            live = [i for i in live if episodes[i]["termination"] is None]
    return [_record(pool.env_id, e, settings.success_reward, pool.reward_range) for e in episodes]


def _record(env_id: str, e: dict[str, Any], success_reward: float, reward_range: tuple[float, float] = (0.0, 1.0)) -> Trajectory:
    """A trajectory's reward is a share of the env's declared range (the env's own figure is kept as
    ``metadata.env_reward``), so a ``[-1, 1]`` env's trajectories read like any other's."""
    metadata: dict[str, Any] = {"trial": e["trial"], "termination_reason": e["termination"], "reward_detail": e["detail"],
                                "env_id": env_id, "seed": e["seed"]}
    if e.get("task_version"):
        metadata["task_version"] = e["task_version"]
    if e.get("error"):
        metadata["infrastructure_error"] = e["error"]
    low, high = reward_range
    metadata["env_reward"] = float(e["reward"])
    reward = min(1.0, max(0.0, (float(e["reward"]) - low) / (high - low)))
    capability = e.get("capability") or env_id.removeprefix("trace/")
    return Trajectory(
        id=f"{env_id}:{e['seed']}#{e['trial']}", target=e.get("target") or "unknown", task_id=f"{capability}:{e['seed']}",
        messages=e["messages"], reward=reward, success=reward >= success_reward, source="factory-train", metadata=metadata,
    )
