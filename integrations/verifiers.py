"""verifiers: a registered env as a ``vf.MultiTurnEnv`` (``pip install 'trace-factory[verifiers]'``).

    from integrations.verifiers import load_environment
    env = load_environment("trace/precondition_verification-v0", seeds=256)
    results = env.evaluate_sync(client, model="...", num_examples=8)

or through verifiers' own loader and CLI, with this module as the installable environment module:

    env = vf.load_environment("integrations.verifiers", env="trace/precondition_verification-v0")
    vf-eval integrations.verifiers -a '{"env": "trace/precondition_verification-v0"}' -m MODEL -b URL

Each rollout opens the env with ``gym.make`` (a sandbox worker), resets it with the row's seed and takes
the system prompt, first user message and tool schemas from it; every assistant turn goes to the env as
an OpenAI message, and the env's answer (tool results, the simulated user) comes back as the next
messages, until the env ends the episode. The rubric is the env's own reward. When verifiers stops a
rollout first (``max_turns``, a timeout), the turn not yet sent is sent and the env grades the state
reached (``TraceEnv.truncate``), so a capped rollout still scores.

The extra pins verifiers 0.3.1, whose ``mcp<2`` cannot share an install with the ``targets`` extra
(``mcp==2.3.0``); every later and earlier release conflicts with another of our pins (see README).
"""

from __future__ import annotations

import asyncio
from typing import Any

import gymnasium as gym
import verifiers as vf
from datasets import Dataset
from verifiers.types import AssistantMessage, SystemMessage, Tool, ToolMessage, UserMessage

import env_registry  # noqa: F401  (registers the trace/ ids)


def _to_vf(message: dict[str, Any]) -> Any:
    """One of our OpenAI-format messages as a verifiers message."""
    role, content = message.get("role"), message.get("content") or ""
    if role == "system":
        return SystemMessage(content=content)
    if role == "tool":
        return ToolMessage(tool_call_id=str(message.get("tool_call_id") or ""), content=content)
    if role == "assistant":
        return AssistantMessage(content=content)
    return UserMessage(content=content)


def _to_action(message: Any) -> Any:
    """A verifiers assistant message as the env's action: an OpenAI message with its tool calls, or its text."""
    content = message.content if isinstance(message.content, str) else None
    calls = getattr(message, "tool_calls", None) or []
    if not calls:
        return content or ""
    return {
        "role": "assistant", "content": content,
        "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls],
    }


class TraceVerifiersEnv(vf.MultiTurnEnv):
    """Rollouts of one registered env; the dataset is its scenario seeds (``info["seed"]``)."""

    def __init__(self, env_id: str, *, seeds: int = 256, first_seed: int = 0, sandbox: str | None = None,
                 max_steps: int | None = None, max_turns: int = -1, **kwargs: Any) -> None:
        self.trace_env_id = env_id
        self.make_kwargs = {k: v for k, v in {"sandbox": sandbox, "max_steps": max_steps}.items() if v is not None}
        rows = range(first_seed, first_seed + seeds)
        dataset = Dataset.from_dict({
            "prompt": [[{"role": "user", "content": f"seed {k}"}] for k in rows],  # replaced by the env's own at setup
            "info": [{"seed": k} for k in rows],
        })
        rubric = vf.Rubric(funcs=[self.trace_reward], weights=[1.0])
        # verifiers names an env by the module that loads it (its env servers reload it from env_id + env_args)
        env_args = {"env": env_id, "seeds": seeds, "first_seed": first_seed, "max_turns": max_turns, **self.make_kwargs}
        super().__init__(dataset=dataset, rubric=rubric, max_turns=max_turns, env_id=__name__, env_args=env_args, **kwargs)

    async def trace_reward(self, state: Any, **_: Any) -> float:
        """The env's reward for the episode (0 when the env never ended or graded it, e.g. it failed to start)."""
        return float(state.get("trace_reward") or 0.0)

    async def setup_state(self, state: Any) -> Any:
        env = await asyncio.to_thread(gym.make, self.trace_env_id, **self.make_kwargs)
        state["trace_env"] = env
        state["trace_sent"] = 0
        _, info = await asyncio.to_thread(env.reset, seed=int(state["info"]["seed"]))
        state["prompt"] = [_to_vf(m) for m in info["messages"]]
        state["tool_defs"] = [
            Tool(name=t["function"]["name"], description=t["function"].get("description", ""),
                 parameters=t["function"].get("parameters", {"type": "object", "properties": {}}))
            for t in info["tools"]
        ]
        return state

    async def _send(self, state: Any, message: Any) -> list[Any]:
        """Step the env with one assistant turn; an ending step records the reward and the final messages."""
        env = state["trace_env"]
        _, reward, terminated, truncated, info = await asyncio.to_thread(env.step, _to_action(message))
        state["trace_sent"] += 1
        replies = [_to_vf(m) for m in info.get("new_messages", [])]
        if terminated or truncated:
            state["trace_reward"], state["trace_info"] = float(reward), info
            state["final_env_response"] = replies or [UserMessage(content="[the episode has ended]")]
        return replies

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        return await self._send(state, messages[-1])

    @vf.cleanup
    async def finish_episode(self, state: Any) -> None:
        """A rollout verifiers stopped first: send the last turn, then grade the state reached; then close."""
        env = state.get("trace_env")
        if env is None:
            return
        try:
            if "trace_reward" not in state and state.get("error") is None:
                turns = state.get("trajectory") or []
                if len(turns) > state["trace_sent"] and turns[-1]["completion"]:
                    await self._send(state, turns[-1]["completion"][-1])
                if "trace_reward" not in state:
                    _, reward, _, _, info = await asyncio.to_thread(env.unwrapped.truncate)
                    state["trace_reward"], state["trace_info"] = float(reward), info
        finally:
            state.pop("trace_env", None)
            await asyncio.to_thread(env.close)


def load_environment(env: str, **kwargs: Any) -> TraceVerifiersEnv:
    """The verifiers entry point: ``env`` is a registered ``trace/<capability>-v<N>``; ``kwargs`` go to
    :class:`TraceVerifiersEnv` (``seeds``, ``first_seed``, ``sandbox``, ``max_steps``, ``max_turns``).

    verifiers finds this module by its import name, so its own loader and CLI reach every registered env:
    ``vf.load_environment("integrations.verifiers", env="trace/x-v0")`` and
    ``vf-eval integrations.verifiers -a '{"env": "trace/x-v0"}'``. The parameter is ``env``, not ``env_id``:
    verifiers' ``load_environment(env_id, **env_args)`` takes ``env_id`` for the module's name."""
    if not isinstance(env, str) or not env.startswith("trace/"):
        raise ValueError(f"env={env!r}: pass a registered env id, e.g. env='trace/precondition_verification-v0' (see factory envs list)")
    return TraceVerifiersEnv(env, **kwargs)
