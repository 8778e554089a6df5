"""Host side: multi-turn rollouts of a token policy in sandboxed envs, every live episode advancing together.

The env drives the loop. Each turn, one batched generation produces the next assistant turn of every live
episode; the decoded text goes to the env as the action; the env's reply (tool results, the simulated
user's answer) is rendered by the chat template and appended as masked env tokens. The tokens trained on
are exactly the sampled ones. Nothing is silently zeroed: an episode cut at the context limit, or whose
sandbox failed, is kept out of the update and counted; a turn cut at ``max_new_tokens`` is counted.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from trainer.chat import ChatFormat
from trainer.config import RolloutSettings
from trainer.engines import Engine
from trainer.envpool import EnvPool

# τ²-bench's termination vocabulary (the project's trajectory convention), from the env's ``ended_by``.
CONTEXT_LIMIT = "context_limit"


@dataclass
class Rollout:
    """One episode as the update sees it: prompt + completion tokens, which of them were generated, reward."""

    group: int
    member: int
    seed: int
    hinted: bool = False
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    completion_mask: list[int] = field(default_factory=list)
    reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    ended_by: str | None = None
    termination: str = "agent_stop"
    turns: int = 0
    cut_turns: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    scenario_hash: str | None = None
    error: str | None = None

    @property
    def trainable(self) -> bool:
        """False when the episode has no valid reward: cut at the context limit or broken by infrastructure."""
        return self.error is None and self.termination not in (CONTEXT_LIMIT, "infrastructure_error")

    @property
    def generated_tokens(self) -> int:
        return sum(self.completion_mask)

    def sequence(self) -> tuple[list[int], list[int]]:
        """Token ids and loss mask of the whole episode, trailing env tokens dropped (nothing to predict)."""
        last = max((i for i, m in enumerate(self.completion_mask) if m), default=-1)
        ids = self.prompt_ids + self.completion_ids[: last + 1]
        mask = [0] * len(self.prompt_ids) + self.completion_mask[: last + 1]
        return ids, mask


def termination_reason(ended_by: str | None, truncated: bool) -> str:
    if ended_by is None:
        return "max_steps" if truncated else "agent_stop"
    if ended_by.startswith("tool:"):
        return "agent_stop"
    return {"user": "user_stop", "max_steps": "max_steps", "env_error": "user_error"}.get(ended_by, "agent_stop")


def with_hint(messages: list[dict[str, Any]], hint: str) -> list[dict[str, Any]]:
    """The prompt a hinted rollout generates from: the hint appended to the system message."""
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0].get('content') or ''}\n\n{hint}"
    else:
        out.insert(0, {"role": "system", "content": hint})
    return out


def hint_from_reference(messages: list[dict[str, Any]]) -> str:
    """An expert hint written from a reference episode: its assistant actions, in order, as plain text."""
    steps = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            steps.append(f"call {function.get('name')} with {function.get('arguments') or '{}'}")
        if message.get("content"):
            steps.append(f"tell the user: {json.dumps(message['content'])}")
    return "Hint from an expert: " + "; then ".join(steps) + "." if steps else ""


@dataclass
class RolloutStats:
    generation_seconds: float = 0.0
    env_seconds: float = 0.0
    generated_tokens: int = 0


def collect_groups(
    engine: Engine,
    chat: ChatFormat,
    pool: EnvPool,
    seeds: list[int],
    group_size: int,
    settings: RolloutSettings,
    hints: dict[int, str] | None = None,
    group_offset: int = 0,
) -> tuple[list[Rollout], RolloutStats]:
    """Roll out ``group_size`` episodes from each seed; member k < share * K of a group gets the hint."""
    stats = RolloutStats()
    env_before = pool.env_seconds
    n = len(seeds) * group_size
    hinted_per_group = int(round(settings.hint.share * group_size)) if hints else 0
    rollouts = [
        Rollout(group=group_offset + i // group_size, member=i % group_size, seed=seeds[i // group_size]) for i in range(n)
    ]
    first = pool.reset(list(range(n)), [r.seed for r in rollouts])
    prompts: dict[int, list[int]] = {}
    for i, (rollout, outcome) in enumerate(zip(rollouts, first)):
        if outcome.reply is None:
            rollout.error, rollout.termination = outcome.error, "infrastructure_error"
            continue
        rollout.messages, rollout.tools = outcome.reply.messages, outcome.reply.tools
        rollout.scenario_hash = outcome.reply.scenario_hash
        rollout.prompt_ids = chat.prompt_ids(rollout.messages, rollout.tools)
        hint = (hints or {}).get(rollout.seed, "")
        if hint and rollout.member < hinted_per_group:
            rollout.hinted = True
            prompts[i] = chat.prompt_ids(with_hint(rollout.messages, hint), rollout.tools)
        else:
            prompts[i] = list(rollout.prompt_ids)
    session = engine.session(prompts)
    live = list(prompts)
    lengths = {i: len(prompts[i]) for i in live}
    while live:
        too_long = [i for i in live if lengths[i] + settings.max_new_tokens > settings.max_seq_len]
        for i in too_long:
            rollouts[i].termination = CONTEXT_LIMIT
        if too_long:
            session.drop(too_long)
            live = [i for i in live if i not in too_long]
            if not live:
                break
        started = time.perf_counter()
        generated = session.generate()
        stats.generation_seconds += time.perf_counter() - started
        actions = [chat.decode_action(generated[i].tokens) for i in live]
        outcomes = pool.step(live, actions)
        finished = []
        for i, action, outcome in zip(live, actions, outcomes):
            rollout, turn = rollouts[i], generated[i]
            rollout.completion_ids += turn.tokens
            rollout.completion_mask += [1] * len(turn.tokens)
            rollout.turns += 1
            rollout.cut_turns += 0 if turn.ended or turn.stopped else 1
            stats.generated_tokens += len(turn.tokens)
            lengths[i] += len(turn.tokens)
            reply = outcome.reply
            if reply is None:
                rollout.error, rollout.termination = outcome.error, "infrastructure_error"
                finished.append(i)
                continue
            assistant = reply.assistant_message or {"role": "assistant", "content": action}
            history = rollout.messages + [assistant]
            if reply.terminated or reply.truncated:
                rollout.messages = reply.messages or history + reply.new_messages
                rollout.reward, rollout.reward_components = reply.reward, reply.reward_components
                rollout.ended_by = reply.ended_by
                rollout.termination = termination_reason(reply.ended_by, reply.truncated)
                finished.append(i)
                continue
            env_tokens = chat.continuation_ids(history, reply.new_messages, rollout.tools, ended_with_eos=turn.ended)
            rollout.messages = history + reply.new_messages
            rollout.completion_ids += env_tokens
            rollout.completion_mask += [0] * len(env_tokens)
            lengths[i] += len(env_tokens)
            session.extend(i, env_tokens)
        if finished:
            session.drop(finished)
            live = [i for i in live if i not in finished]
    stats.env_seconds = pool.env_seconds - env_before
    return rollouts, stats
