"""The Gymnasium face of a registered env: text in, text out, reward at the end.

``gym.make("trace/<capability>-v<N>")`` builds a :class:`TraceEnv` over the stored env version. Actions are
one assistant turn: raw model text (Hermes/Qwen ``<tool_call>`` blocks and OpenAI JSON are parsed) or an
OpenAI message dict with ``tool_calls``. Observations are the new messages as text; ``info["messages"]``
(at reset and at the end) and ``info["new_messages"]`` carry the structured OpenAI-format messages that
chat templates need, and ``info["tools"]`` the tool schemas.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from env_registry.spaces import AnyText

if TYPE_CHECKING:
    from env_registry.execution import Runner

MAX_OBSERVATION_CHARS = 2_000_000
MAX_ACTION_CHARS = 200_000


class TraceEnv(gym.Env[str, str]):
    """One synthetic training env for one capability. ``runner`` is an EpisodeRunner or a SandboxedRunner."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        capability: str | None = None,
        version: int | None = None,
        registry_root: str | Path | None = None,
        runner: "Runner | None" = None,
        render_mode: str | None = None,
        sandbox: str | None = None,
    ) -> None:
        if runner is None:
            if capability is None:
                raise ValueError("TraceEnv needs a capability (from the registry) or a runner")
            from env_registry.execution import open_runner
            from env_registry.registry import Registry

            runner = open_runner(Registry(registry_root).get(capability, version), sandbox)
        self.runner = runner
        self.capability = runner.capability
        self.observation_space = AnyText(MAX_OBSERVATION_CHARS)
        self.action_space = AnyText(MAX_ACTION_CHARS)
        self.render_mode = render_mode
        self._last_observation = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(0, 2**31 - 1))
        result = self.runner.reset(seed)
        self._last_observation = result.observation
        return result.observation, result.info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        result = self.runner.step(_sendable(action))
        self._last_observation = result.observation
        return result.observation, float(result.reward), result.terminated, result.truncated, result.info

    def close(self) -> None:
        """Stops the sandbox worker that hosts the env code, if there is one."""
        self.runner.close()
        super().close()

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last_observation
        return None


def _sendable(action: Any) -> Any:
    """The action, or - when it cannot travel to the env as JSON (a cycle, extreme nesting) - a refused call
    that says so, which the env answers with an error observation. A bad action never raises, sandboxed or not."""
    if action is None or isinstance(action, str):
        return action
    from env_registry.hosted import action_to_json

    try:
        json.dumps(action_to_json(action))
    except (TypeError, ValueError, RecursionError) as exc:
        problem = f"the action could not be encoded as JSON ({type(exc).__name__}); send text or a JSON-encodable message"
        return {"role": "assistant", "content": None, "tool_calls": [{"name": "invalid", "error": problem}]}
    return action
