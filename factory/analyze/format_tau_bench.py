"""τ-bench (the original, v1) results as trajectories.

A JSON list of ``EnvRunResult`` ``{task_id, reward, info, traj, trial}``: ``traj`` holds OpenAI-format
messages (tool-calling agents) or ReAct text with ``Action:`` JSON and ``API output:`` replies;
``info.task`` is the task (``user_id``, ``instruction``, ``actions`` with ``kwargs``, ``outputs``).

τ-bench task ids are positions in a Python list, not τ² task ids, so they are never looked up in a τ²
tasks file; ``revisions.match_tau_bench`` matches records to τ² tasks by content instead. τ-bench's tool
set differs from τ²'s (it has ``think``; it lacks ``get_flight_status`` and ``get_item_details``), so each
trajectory names its own tools in ``metadata["tools"]``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from factory.analyze.errors import TrajectoryFormatError
from factory.analyze.format_tau2 import checked_reward, is_success
from factory.analyze.tasks import spec_from_tau_bench
from schemas.errors import validation_message
from schemas.messages import FunctionCall, Message, ToolCall
from schemas.trajectory import Trajectory

TOOLS: dict[str, list[str]] = {
    "airline": [
        "book_reservation", "calculate", "cancel_reservation", "get_reservation_details", "get_user_details",
        "list_all_airports", "search_direct_flight", "search_onestop_flight", "send_certificate", "think",
        "transfer_to_human_agents", "update_reservation_baggages", "update_reservation_flights",
        "update_reservation_passengers",
    ],
    "retail": [
        "calculate", "cancel_pending_order", "exchange_delivered_order_items", "find_user_id_by_email",
        "find_user_id_by_name_zip", "get_order_details", "get_product_details", "get_user_details",
        "list_all_product_types", "modify_pending_order_address", "modify_pending_order_items",
        "modify_pending_order_payment", "modify_user_address", "return_delivered_order_items", "think",
        "transfer_to_human_agents",
    ],
}  # fmt: skip
"""τ-bench's own tools per domain (``tau_bench/envs/<domain>/tools``)."""
_MARKERS = {
    "airline": {"book_reservation", "cancel_reservation", "get_reservation_details", "search_direct_flight", "send_certificate"},
    "retail": {"cancel_pending_order", "get_order_details", "find_user_id_by_email", "find_user_id_by_name_zip", "get_product_details"},
}


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Function(_Lenient):
    name: str
    arguments: str | dict[str, Any] = "{}"


class _ToolCall(_Lenient):
    id: str = ""
    function: _Function


class _Message(_Lenient):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class _Run(_Lenient):
    task_id: int | str
    reward: float
    info: dict[str, Any] = {}
    traj: list[_Message]
    trial: int | None = None


def _react_action(content: str | None) -> dict[str, Any] | None:
    if not content or "Action:" not in content:
        return None
    try:
        action = json.loads(content.split("Action:")[-1].strip())
    except json.JSONDecodeError:
        return None
    if isinstance(action, dict) and isinstance(action.get("name"), str):
        return action
    return None


def _messages(run: _Run) -> list[Message]:
    out: list[Message] = []
    pending_react: str | None = None
    for number, message in enumerate(run.traj):
        if message.role == "assistant":
            calls = None
            content = message.content
            if message.tool_calls:
                calls = []
                for k, call in enumerate(message.tool_calls):
                    args = call.function.arguments
                    calls.append(ToolCall(
                        id=call.id or f"call_{number}_{k}",
                        function=FunctionCall(name=call.function.name, arguments=args if isinstance(args, str) else json.dumps(args)),
                    ))  # fmt: skip
            else:
                action = _react_action(content)
                if action and action["name"] != "respond":
                    call_id = f"react_{number}"
                    calls = [ToolCall(id=call_id, function=FunctionCall(name=action["name"], arguments=json.dumps(action.get("arguments", {}))))]
                    pending_react = call_id
                elif action:
                    content = str((action.get("arguments") or {}).get("content", content))
            out.append(Message(role="assistant", content=content, tool_calls=calls))
        elif message.role == "user" and pending_react and (message.content or "").startswith("API output:"):
            text = (message.content or "")[len("API output:") :].strip()
            name = out[-1].tool_calls[0].function.name if out and out[-1].tool_calls else None
            out.append(Message(role="tool", content=text, tool_call_id=pending_react, name=name))
            pending_react = None
        else:
            pending_react = None
            out.append(Message(role=message.role, content=message.content, tool_call_id=message.tool_call_id, name=message.name))
    return out


def _domain(used: set[str]) -> str | None:
    for domain, markers in _MARKERS.items():
        if used & markers:
            return domain
    return None


def parse_results(path: Path, data: list[Any], skipped: list[str]) -> list[Trajectory]:
    """One file holds one domain: records that touch no domain-specific tool take the file's domain."""
    out = _records(path, data, skipped)
    domains = Counter(t.metadata.get("domain") for t in out if t.metadata.get("domain"))
    if len(domains) == 1:
        domain = next(iter(domains))
        for t in out:
            if "domain" not in t.metadata:
                t.metadata.update(domain=domain, tools=TOOLS[domain])
                t.target = f"tau-bench-{domain}"
                if isinstance(t.metadata.get("task"), dict):
                    t.metadata["task"]["domain"] = domain
    return out


def _records(path: Path, data: list[Any], skipped: list[str]) -> list[Trajectory]:
    out = []
    for number, raw in enumerate(data):
        record = f"record [{number}]"
        if not isinstance(raw, dict):
            raise TrajectoryFormatError(path, f"expected an object, got {type(raw).__name__}", record=record)
        if isinstance(raw.get("task_id"), (int, str)):
            record += f" (task_id {raw['task_id']!r})"
        info = raw.get("info") if isinstance(raw.get("info"), dict) else {}
        if not raw.get("traj") and "error" in info:
            skipped.append(f"{path}: {record}: run errored ({str(info['error'])[:80]})")
            continue
        if "reward" in raw:
            checked_reward(path, record, "reward", raw["reward"])
        try:
            run = _Run.model_validate(raw)
        except ValidationError as exc:
            raise TrajectoryFormatError(path, validation_message(exc), record=record) from None
        reward = checked_reward(path, record, "reward", run.reward)
        task_raw = run.info.get("task") if isinstance(run.info.get("task"), dict) else None
        messages = _messages(run)
        used = {c.function.name for m in messages for c in (m.tool_calls or [])}
        used |= {a.get("name") for a in (task_raw or {}).get("actions") or [] if isinstance(a, dict)}
        domain = _domain(used)
        task_id = str(run.task_id)
        metadata: dict[str, Any] = {"trial": run.trial, "source_file": str(path), "record": f"record [{number}]", "task_index": task_id}
        if domain:
            metadata["domain"] = domain
            metadata["tools"] = TOOLS[domain]
        if task_raw is not None:
            metadata["task"] = spec_from_tau_bench(task_raw, task_id, domain, origin=str(path)).model_dump(mode="json")
        out.append(Trajectory(
            id=f"{task_id}#{run.trial}" if run.trial is not None else f"{task_id}#{number}",
            target=f"tau-bench-{domain}" if domain else "tau-bench",
            task_id=task_id,
            messages=messages,
            reward=reward,
            success=is_success(reward),
            source="tau-bench",
            metadata=metadata,
        ))  # fmt: skip
    return out
