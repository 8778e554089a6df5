"""τ²-bench ``Results`` files (``tau2 run`` output) as trajectories.

``{"info", "tasks", "simulations": [SimulationRun]}``, also the "dir" layout (a folder or ``results.json``
with a ``simulations/`` folder of SimulationRun files) and a single SimulationRun file. Messages are
``SystemMessage | UserMessage | AssistantMessage | ToolMessage | MultiToolMessage``; tool calls are
``{id, name, arguments: dict, requestor}``; tool results ``{id, role: "tool", content, requestor, error}``.
The reward is ``reward_info.reward``.

Each trajectory carries the task object the run used (``metadata["task"]``), the tools the run offered
when the file lists them (``metadata["tools"]``), the termination reason and the reward breakdown. The
breakdown is for people reading the report: the offline labeler never sees it (see ``offline.blind``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from factory.analyze.errors import TrajectoryFormatError
from factory.analyze.tasks import spec_from_tau2
from factory.analyze.world import policy_now
from schemas.errors import one_line, validation_message
from schemas.messages import FunctionCall, Message, ToolCall
from schemas.trajectory import Trajectory

SUCCESS_REWARD = 1.0 - 1e-6
"""τ² and τ-bench count a run as solved when its reward is 1 (up to float noise)."""
REWARD_SLACK = 1e-6


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _ToolCall(_Lenient):
    id: str = ""
    name: str
    arguments: dict[str, Any]
    requestor: Literal["user", "assistant"] = "assistant"


class _ToolResult(_Lenient):
    id: str = ""
    role: Literal["tool"]
    content: str | None = None
    requestor: Literal["user", "assistant"] = "assistant"
    error: bool = False


class _Message(_Lenient):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None
    id: str | None = None
    requestor: Literal["user", "assistant"] = "assistant"
    error: bool = False
    tool_messages: list[_ToolResult] | None = None  # MultiToolMessage


class _RewardInfo(_Lenient):
    reward: float
    reward_basis: list[str] | None = None
    reward_breakdown: dict[str, float] | None = None
    db_check: dict[str, Any] | None = None


class _Simulation(_Lenient):
    id: str
    task_id: str
    trial: int | None = None
    termination_reason: str | None = None
    reward_info: _RewardInfo | None = None
    messages: list[_Message] | None = None
    ticks: list[Any] | None = None

    @field_validator("task_id", mode="before")
    @classmethod
    def _task_id_str(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value


def checked_reward(path: Path, record: str, field: str, value: Any) -> float:
    """A reward read from a file: finite and within [0, 1] (float noise is clamped), else one clear error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TrajectoryFormatError(path, f"expected a number, got {type(value).__name__}", record=record, field=field)
    if not math.isfinite(value):
        raise TrajectoryFormatError(path, f"{value} is not a finite number; a reward must be between 0 and 1", record=record, field=field)
    if value < -REWARD_SLACK or value > 1 + REWARD_SLACK:
        raise TrajectoryFormatError(path, f"{value:g} is out of range; a reward must be between 0 and 1", record=record, field=field)
    return min(1.0, max(0.0, float(value)))


def is_success(reward: float) -> bool:
    return reward >= SUCCESS_REWARD


def _messages(sim: _Simulation) -> list[Message]:
    out: list[Message] = []
    names: dict[str, str] = {}
    for message in sim.messages or []:
        if message.role == "tool":
            results = message.tool_messages or [
                _ToolResult(id=message.id or "", role="tool", content=message.content, requestor=message.requestor, error=message.error)
            ]
            for result in results:
                extra: dict[str, Any] = {"error": result.error}
                if result.requestor != "assistant":
                    extra["requestor"] = result.requestor
                out.append(Message(role="tool", content=result.content, tool_call_id=result.id, name=names.get(result.id), **extra))
            continue
        calls = None
        if message.tool_calls:
            calls = []
            for number, call in enumerate(message.tool_calls):
                call_id = call.id or f"call_{len(out)}_{number}"
                names[call_id] = call.name
                function = FunctionCall(name=call.name, arguments=json.dumps(call.arguments, ensure_ascii=False))
                calls.append(ToolCall(id=call_id, function=function))
        extra = {"requestor": "user"} if message.role == "user" and message.tool_calls else {}
        out.append(Message(role=message.role, content=message.content, tool_calls=calls, **extra))
    return out


def _tool_names(env_info: dict[str, Any]) -> list[str] | None:
    """Tool names the run offered, when the file lists them (``environment_info.tool_defs``)."""
    defs = env_info.get("tool_defs")
    names: list[str] = []
    if isinstance(defs, dict):
        names = [str(k) for k in defs]
    elif isinstance(defs, list):
        for item in defs:
            if isinstance(item, dict):
                name = (item.get("function") or {}).get("name") if isinstance(item.get("function"), dict) else item.get("name")
                if isinstance(name, str):
                    names.append(name)
    return sorted(names) or None


def parse_results(path: Path, data: dict[str, Any], extra_sims: list[tuple[str, Any]] | None = None) -> list[Trajectory]:
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    env_info = info.get("environment_info") if isinstance(info.get("environment_info"), dict) else {}
    domain = env_info.get("domain_name") if isinstance(env_info.get("domain_name"), str) else None
    agent_info = info.get("agent_info") if isinstance(info.get("agent_info"), dict) else {}
    tools = _tool_names(env_info)
    tasks = data.get("tasks") or []
    if not isinstance(tasks, list):
        raise TrajectoryFormatError(path, "expected a list", field="tasks")
    specs: dict[str, dict[str, Any]] = {}
    for number, task in enumerate(tasks):
        if not isinstance(task, dict) or "id" not in task:
            raise TrajectoryFormatError(path, "not a τ² task object (no id)", record=f"tasks[{number}]")
        try:
            spec = spec_from_tau2(task, origin=str(path), domain=domain)
        except (KeyError, TypeError, AttributeError, ValidationError) as exc:
            raise TrajectoryFormatError(path, f"malformed ({one_line(exc)})", record=f"tasks[{number}]", field="evaluation_criteria") from None
        specs[spec.id] = spec.model_dump(mode="json")
    sims = data.get("simulations")
    if sims is None:
        sims = []
    if not isinstance(sims, list):
        raise TrajectoryFormatError(path, f"expected a list, got {type(sims).__name__}", field="simulations")
    records: list[tuple[str, Any]] = [(f"simulations[{i}]", s) for i, s in enumerate(sims)] + list(extra_sims or [])
    policy = env_info.get("policy") if isinstance(env_info.get("policy"), str) else None
    common = {"domain": domain, "agent_llm": agent_info.get("llm"), "tools": tools, "policy_now": policy_now(policy) if policy else None}
    return [_simulation(path, record, raw, specs, common) for record, raw in records]


def _simulation(path: Path, record: str, raw: Any, specs: dict[str, dict[str, Any]], common: dict[str, Any]) -> Trajectory:
    if not isinstance(raw, dict):
        raise TrajectoryFormatError(path, f"expected a SimulationRun object, got {type(raw).__name__}", record=record)
    label = record + (f" (id {raw['id']!r})" if isinstance(raw.get("id"), str) else "")
    reward_raw = raw.get("reward_info")
    if isinstance(reward_raw, dict) and "reward" in reward_raw:
        reward = checked_reward(path, label, "reward_info.reward", reward_raw["reward"])
    else:
        reward = 0.0
    try:
        sim = _Simulation.model_validate(raw)
    except ValidationError as exc:
        raise TrajectoryFormatError(path, validation_message(exc), record=label) from None
    if sim.messages is None:
        problem = "full-duplex run without messages is not supported" if sim.ticks else "missing"
        raise TrajectoryFormatError(path, problem, record=label, field="messages")
    metadata: dict[str, Any] = {
        "simulation_id": sim.id,
        "trial": sim.trial,
        "termination_reason": sim.termination_reason,
        "source_file": str(path),
        "record": record,
    }
    metadata.update({k: v for k, v in common.items() if v})
    if sim.reward_info is None:
        metadata["reward_missing"] = True
    else:
        detail: dict[str, Any] = {}
        if sim.reward_info.reward_breakdown:
            detail["breakdown"] = sim.reward_info.reward_breakdown
        if sim.reward_info.db_check and "db_match" in sim.reward_info.db_check:
            detail["db_match"] = sim.reward_info.db_check["db_match"]
        if detail:
            metadata["reward_detail"] = detail
    if sim.task_id in specs:
        metadata["task"] = specs[sim.task_id]
    domain = common.get("domain")
    return Trajectory(
        id=f"{sim.task_id}#{sim.trial}" if sim.trial is not None else sim.id,
        target=f"tau2-{domain}" if domain else "tau2",
        task_id=sim.task_id,
        messages=_messages(sim),
        reward=reward,
        success=is_success(reward),
        source="tau2",
        metadata=metadata,
    )

