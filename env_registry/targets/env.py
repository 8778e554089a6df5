"""``gym.make("target/tau2-airline-v0", task_id="3")``: a real target behind the face of a synthetic env.

:class:`TargetEnv` is a :class:`~env_registry.gym_env.TraceEnv` over a
:class:`~env_registry.targets.runner.TargetRunner`, so spaces, rendering, actions, observations and
``info`` keys are the synthetic envs' own. Without ``task_id``, ``reset(seed)`` picks task ``seed mod
#tasks``; ``reset(options={"task_id": ...})`` picks one explicitly. Close the env to stop its server.
"""

from __future__ import annotations

from pathlib import Path
from schemas.errors import validation_message
from typing import Any

import gymnasium as gym

from env_registry.gym_env import TraceEnv
from pydantic import ValidationError

from env_registry.targets.catalog import BackendName, TargetSpec, resolve_target
from env_registry.targets.errors import TargetConfigError
from env_registry.targets.mcp import MCPServerSpec, parse_server
from env_registry.targets.runner import TargetRunner
from env_registry.targets.users import user_factory


def make_judge(spec: Any) -> Any:
    """None (NL assertions reported as not judged), an LLM spec string, or a callable judge."""
    if spec is None or callable(spec):
        return spec
    from llm_clients import make_client, parse_llm_spec

    from env_registry.targets.judge import NLJudge

    return NLJudge(make_client(parse_llm_spec(str(spec))))


def with_server_contract(spec: TargetSpec, **contract: Any) -> TargetSpec:
    """The spec with an MCP server's reset contract and state tool set (``None``/False values leave the default)."""
    updates = {k: v for k, v in contract.items() if v not in (None, False)}
    if not updates:
        return spec
    if spec.server is None:
        raise TargetConfigError(f"{', '.join(sorted(updates))}: only an MCP server takes these (target {spec.id!r} is not served over MCP)")
    try:
        server = MCPServerSpec.model_validate({**spec.server.model_dump(), **updates})
    except ValidationError as exc:
        raise TargetConfigError(f"MCP server options: {validation_message(exc)}") from None
    return spec.model_copy(update={"server": server})


class TargetEnv(TraceEnv):
    """One real target (τ² airline or retail, or any MCP server with a task file) as a Gymnasium env."""

    def __init__(
        self,
        target: str = "tau2-airline",
        task_id: str | int | None = None,
        tasks: str | Path | None = None,
        server: str | MCPServerSpec | None = None,
        backend: BackendName = "auto",
        user: Any = "scripted",
        judge: Any = None,
        policy: str | None = None,
        max_steps: int = 100,
        max_errors: int = 10,
        call_timeout_s: float | None = None,
        render_mode: str | None = None,
        reset: str | None = None,
        reset_tool: str | None = None,
        state_tool: str | None = None,
        allow_shared_state: bool = False,
    ) -> None:
        self._init_kwargs = {
            "target": target, "task_id": task_id, "tasks": tasks, "server": server, "backend": backend, "user": user,
            "judge": judge, "policy": policy, "max_steps": max_steps, "max_errors": max_errors,
            "call_timeout_s": call_timeout_s, "render_mode": render_mode, "reset": reset, "reset_tool": reset_tool,
            "state_tool": state_tool, "allow_shared_state": allow_shared_state,
        }
        server_spec = parse_server(server) if isinstance(server, str) else server
        spec = resolve_target(target, tasks_file=tasks, server=server_spec, backend=backend, policy=policy, call_timeout_s=call_timeout_s)
        spec = with_server_contract(spec, reset=reset, reset_tool=reset_tool, state_tool=state_tool, allow_shared_state=allow_shared_state)
        runner = TargetRunner(
            spec,
            task_id=None if task_id is None else str(task_id),
            user=user_factory(user),
            judge=make_judge(judge),
            max_steps=max_steps,
            max_errors=max_errors,
        )
        super().__init__(runner=runner, render_mode=render_mode)

    def __getstate__(self) -> dict[str, Any]:
        """A target env pickles as its constructor's arguments; the unpickled one starts its own server."""
        return {"init": self._init_kwargs, "spec": self.spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["init"])  # type: ignore[misc]
        self.spec = state["spec"]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        gym.Env.reset(self, seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(0, 2**31 - 1))
        task_id = (options or {}).get("task_id")
        result = self.runner.reset(seed, task_id=None if task_id is None else str(task_id))
        self._last_observation = result.observation
        return result.observation, result.info
