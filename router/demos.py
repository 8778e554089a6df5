"""One successful trajectory per capability: the reference solution's episode of its registered env.

The env's code runs only in a sandbox worker (``trace_env.handler``'s ``episode`` RPC with
``policy: "reference"``); what comes back is treated as hostile and validated here: sizes are capped,
roles and tool calls are checked, and an episode counts only if it earned the gate's solvability reward
without an env error.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from env_registry.registry import StoredEnv
from router.errors import DemoError
from router.schema import DemoTrajectory
from sandbox import SandboxError, SandboxLimits
from schemas.errors import validation_message
from schemas.messages import FunctionCall, Message, ToolCall
from schemas.validation import ValidationConfig

MAX_MESSAGES = 120
MAX_CONTENT_CHARS = 20_000
MAX_TOOLS = 200
DEFAULT_SEEDS = tuple(range(8))


class _Function(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,128}$")
    arguments: str | dict[str, Any] = "{}"


class _Call(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str = Field(default="call", max_length=200)
    function: _Function


class _Message(BaseModel):
    """A transcript message as the sandbox reports it; anything unexpected is dropped or refused."""

    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = Field(default=None, max_length=MAX_CONTENT_CHARS)
    tool_calls: list[_Call] | None = Field(default=None, max_length=64)
    tool_call_id: str | None = Field(default=None, max_length=200)
    name: str | None = Field(default=None, max_length=128)


class _Episode(BaseModel):
    model_config = ConfigDict(extra="ignore")
    reward: float = Field(ge=0.0, le=1.0)
    messages: list[_Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    env_errors: list[Any] = Field(default_factory=list)


def _to_message(m: _Message) -> Message:
    calls = None
    if m.tool_calls:
        calls = [
            ToolCall(
                id=c.id,
                function=FunctionCall(
                    name=c.function.name,
                    arguments=c.function.arguments if isinstance(c.function.arguments, str) else json.dumps(c.function.arguments),
                ),
            )
            for c in m.tool_calls
        ]
    return Message(role=m.role, content=m.content, tool_calls=calls, tool_call_id=m.tool_call_id, name=m.name)


def _tools(info: Any) -> list[dict[str, Any]]:
    tools = info.get("tools") if isinstance(info, dict) else None
    if not isinstance(tools, list):
        return []
    kept = [t for t in tools[:MAX_TOOLS] if isinstance(t, dict) and isinstance(t.get("function"), dict)]
    return json.loads(json.dumps(kept))  # plain JSON only


def reference_demo(
    stored: StoredEnv,
    backend: str = "auto",
    seeds: tuple[int, ...] = DEFAULT_SEEDS,
    min_reward: float | None = None,
    limits: SandboxLimits | None = None,
) -> DemoTrajectory:
    """Play the reference solution of ``stored`` in a sandbox until one seed succeeds; return that episode."""
    from env_registry.hosted import SandboxedEnv

    manifest = stored.manifest
    threshold = ValidationConfig().solvability_min_reward if min_reward is None else min_reward
    module_name = f"trace_env_{manifest.capability}_v{manifest.version}"
    best: float | None = None
    problems: list[str] = []
    try:
        with SandboxedEnv(stored.source, backend=backend, limits=limits, module_name=module_name) as hosted:
            tools = _tools(hosted.info)
            for seed in seeds:
                raw = hosted.call("episode", {"seed": seed, "policy": "reference"})
                try:
                    episode = _Episode.model_validate(raw)
                except ValidationError as exc:
                    problems.append(f"seed {seed}: malformed episode ({validation_message(exc, limit=3)})")
                    continue
                best = episode.reward if best is None else max(best, episode.reward)
                if episode.env_errors:
                    problems.append(f"seed {seed}: env error")
                    continue
                if episode.reward >= threshold:
                    return DemoTrajectory(
                        gym_id=manifest.gym_id,
                        seed=seed,
                        reward=episode.reward,
                        messages=[_to_message(m) for m in episode.messages],
                        tools=tools,
                    )
    except SandboxError as exc:
        raise DemoError(
            f"{manifest.gym_id}: the sandbox failed while playing its reference solution "
            f"({type(exc).__name__}: {' '.join(str(exc).split())[:300]}); check the sandbox with `factory validate`"
        ) from None
    detail = f"best reward {best:.2f}" if best is not None else "; ".join(problems[:2]) or "no episode"
    raise DemoError(
        f"{manifest.gym_id}: its reference solution never reached reward {threshold:g} on seeds "
        f"{seeds[0]}..{seeds[-1]} ({detail}); rebuild or re-validate it with `factory build {manifest.capability}`"
    )
