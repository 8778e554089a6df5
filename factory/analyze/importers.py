"""Import agent trajectories into ``schemas.Trajectory``.

Formats, detected from the content (not the file name):

- τ²-bench ``Results`` JSON (``tau2 run`` output): ``{"info", "tasks", "simulations": [SimulationRun]}``;
  also the "dir" layout (a folder or ``results.json`` with a ``simulations/`` folder of SimulationRun
  files) and a single SimulationRun file. Messages are ``SystemMessage | UserMessage | AssistantMessage |
  ToolMessage | MultiToolMessage``; tool calls are ``{id, name, arguments: dict, requestor}``; tool
  results ``{id, role: "tool", content, requestor, error}``. The reward is ``reward_info.reward``.
- τ-bench (original) results: a JSON list of ``EnvRunResult`` ``{task_id, reward, info, traj, trial}``,
  where ``traj`` holds OpenAI-format messages (tool-calling agents) or ReAct text with ``Action:`` JSON
  and ``API output:`` replies; ``info.task.actions`` are the gold actions.
- our own JSONL: one ``Trajectory`` per line (or a JSON list of them).

Gold actions found in a file (τ² ``tasks``, τ-bench ``info.task``) are kept on
``metadata["gold_actions"]`` for the offline labeler. A bad file raises ``TrajectoryFormatError`` naming
the file, the record and the field.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from factory.analyze.errors import TrajectoryFormatError
from factory.analyze.gold import gold_from_task
from schemas.messages import FunctionCall, Message, ToolCall
from schemas.trajectory import Trajectory

SUCCESS_REWARD = 1.0 - 1e-6
"""τ² and τ-bench count a run as solved when its reward is 1 (up to float noise)."""


@dataclass
class ImportResult:
    trajectories: list[Trajectory] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    formats: Counter = field(default_factory=Counter)


# --------------------------------------------------------------------------------------------------
# τ²-bench models (the subset we read; unknown fields are ignored, as newer tau2 versions add many)
# --------------------------------------------------------------------------------------------------
class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _T2ToolCall(_Lenient):
    id: str = ""
    name: str
    arguments: dict[str, Any]
    requestor: Literal["user", "assistant"] = "assistant"


class _T2ToolResult(_Lenient):
    id: str = ""
    role: Literal["tool"]
    content: str | None = None
    requestor: Literal["user", "assistant"] = "assistant"
    error: bool = False


class _T2Message(_Lenient):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[_T2ToolCall] | None = None
    # tool results
    id: str | None = None
    requestor: Literal["user", "assistant"] = "assistant"
    error: bool = False
    tool_messages: list[_T2ToolResult] | None = None  # MultiToolMessage


class _T2RewardInfo(_Lenient):
    reward: float
    reward_basis: list[str] | None = None
    reward_breakdown: dict[str, float] | None = None


class _T2Simulation(_Lenient):
    id: str
    task_id: str
    trial: int | None = None
    termination_reason: str | None = None
    reward_info: _T2RewardInfo | None = None
    messages: list[_T2Message] | None = None
    ticks: list[Any] | None = None

    @field_validator("task_id", mode="before")
    @classmethod
    def _task_id_str(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value


# --------------------------------------------------------------------------------------------------
# τ-bench models
# --------------------------------------------------------------------------------------------------
class _TauFunction(_Lenient):
    name: str
    arguments: str | dict[str, Any] = "{}"


class _TauToolCall(_Lenient):
    id: str = ""
    function: _TauFunction


class _TauMessage(_Lenient):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[_TauToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class _TauRun(_Lenient):
    task_id: int | str
    reward: float
    info: dict[str, Any] = {}
    traj: list[_TauMessage]
    trial: int | None = None


_AIRLINE_TOOLS = {
    "book_reservation", "cancel_reservation", "get_reservation_details", "search_direct_flight",
    "search_onestop_flight", "send_certificate", "update_reservation_baggages", "update_reservation_flights",
    "update_reservation_passengers", "list_all_airports", "get_flight_status",
}  # fmt: skip
_RETAIL_TOOLS = {
    "cancel_pending_order", "exchange_delivered_order_items", "find_user_id_by_email", "find_user_id_by_name_zip",
    "get_order_details", "get_product_details", "list_all_product_types", "modify_pending_order_address",
    "modify_pending_order_items", "modify_pending_order_payment", "modify_user_address",
    "return_delivered_order_items", "get_item_details",
}  # fmt: skip


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------
def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(root)"


def _first_error(exc: ValidationError) -> tuple[str, str]:
    """(field path such as ``messages[2].role``, message) of the first validation error."""
    error = exc.errors()[0]
    return _loc(tuple(error["loc"])), error["msg"]


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TrajectoryFormatError(path, "no such file") from None
    except UnicodeDecodeError:
        raise TrajectoryFormatError(path, "not a UTF-8 text file") from None
    except OSError as exc:
        raise TrajectoryFormatError(path, f"cannot read ({exc.strerror})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # several JSON values: JSON Lines under a .json name
            return _JsonLines(text)
        raise TrajectoryFormatError(path, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


class _JsonLines:
    def __init__(self, text: str) -> None:
        self.text = text


def _is_success(reward: float) -> bool:
    return reward >= SUCCESS_REWARD


def _clamp(reward: float) -> float:
    return min(1.0, max(0.0, float(reward)))


# --------------------------------------------------------------------------------------------------
# τ²-bench
# --------------------------------------------------------------------------------------------------
def _tau2_messages(sim: _T2Simulation) -> list[Message]:
    out: list[Message] = []
    names: dict[str, str] = {}
    for message in sim.messages or []:
        if message.role == "tool":
            results = message.tool_messages or [
                _T2ToolResult(id=message.id or "", role="tool", content=message.content, requestor=message.requestor, error=message.error)
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
                calls.append(ToolCall(id=call_id, function=FunctionCall(name=call.name, arguments=json.dumps(call.arguments, ensure_ascii=False))))
        out.append(Message(role=message.role, content=message.content, tool_calls=calls))
    return out


def _tau2_results(path: Path, data: dict[str, Any], extra_sims: list[tuple[str, Any]] | None = None) -> list[Trajectory]:
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    env_info = info.get("environment_info") if isinstance(info.get("environment_info"), dict) else {}
    domain = env_info.get("domain_name") if isinstance(env_info.get("domain_name"), str) else None
    agent_info = info.get("agent_info") if isinstance(info.get("agent_info"), dict) else {}
    gold: dict[str, list[dict[str, Any]]] = {}
    tasks = data.get("tasks") or []
    if not isinstance(tasks, list):
        raise TrajectoryFormatError(path, "expected a list", record=None, field="tasks")
    for number, task in enumerate(tasks):
        if not isinstance(task, dict) or "id" not in task:
            raise TrajectoryFormatError(path, "not a τ² task object (no id)", record=f"tasks[{number}]")
        try:
            actions = gold_from_task(task)
        except (KeyError, TypeError, ValidationError) as exc:
            raise TrajectoryFormatError(path, f"malformed ({exc})", record=f"tasks[{number}]", field="evaluation_criteria.actions") from None
        if actions is not None:
            gold[str(task["id"])] = [a.model_dump(exclude_none=True) for a in actions]

    sims = data.get("simulations")
    if sims is None:
        sims = []
    if not isinstance(sims, list):
        raise TrajectoryFormatError(path, f"expected a list, got {type(sims).__name__}", field="simulations")
    records: list[tuple[str, Any]] = [(f"simulations[{i}]", s) for i, s in enumerate(sims)] + list(extra_sims or [])
    out = []
    for record, raw in records:
        out.append(_tau2_simulation(path, record, raw, domain, gold, agent_info.get("llm")))
    return out


def _tau2_simulation(
    path: Path, record: str, raw: Any, domain: str | None, gold: dict[str, list[dict[str, Any]]], agent_llm: Any
) -> Trajectory:
    if not isinstance(raw, dict):
        raise TrajectoryFormatError(path, f"expected a SimulationRun object, got {type(raw).__name__}", record=record)
    label = record + (f" (id {raw['id']!r})" if isinstance(raw.get("id"), str) else "")
    try:
        sim = _T2Simulation.model_validate(raw)
    except ValidationError as exc:
        where, msg = _first_error(exc)
        raise TrajectoryFormatError(path, msg, record=label, field=where) from None
    if sim.messages is None:
        problem = "full-duplex run without messages is not supported" if sim.ticks else "missing"
        raise TrajectoryFormatError(path, problem, record=label, field="messages")
    reward = sim.reward_info.reward if sim.reward_info is not None else 0.0
    metadata: dict[str, Any] = {
        "simulation_id": sim.id,
        "trial": sim.trial,
        "termination_reason": sim.termination_reason,
        "source_file": str(path),
    }
    if domain:
        metadata["domain"] = domain
    if agent_llm:
        metadata["agent_llm"] = agent_llm
    if sim.reward_info is None:
        metadata["reward_missing"] = True
    if sim.task_id in gold:
        metadata["gold_actions"] = gold[sim.task_id]
    return Trajectory(
        id=f"{sim.task_id}#{sim.trial}" if sim.trial is not None else sim.id,
        target=f"tau2-{domain}" if domain else "tau2",
        task_id=sim.task_id,
        messages=_tau2_messages(sim),
        reward=_clamp(reward),
        success=_is_success(reward),
        source="tau2",
        metadata=metadata,
    )


def _tau2_dir(path: Path) -> list[Trajectory]:
    results_file = path / "results.json" if path.is_dir() else path
    sims_dir = results_file.parent / "simulations"
    data = _read_json(results_file) if results_file.exists() else {}
    if not isinstance(data, dict):
        raise TrajectoryFormatError(results_file, "expected a τ² Results object")
    extra = []
    if not data.get("simulations") and sims_dir.is_dir():
        for sim_file in sorted(sims_dir.glob("*.json")):
            extra.append((f"simulations/{sim_file.name}", _read_json(sim_file)))
    if not results_file.exists() and not extra:
        raise TrajectoryFormatError(path, "directory has neither results.json nor simulations/*.json")
    return _tau2_results(results_file, data, extra)


# --------------------------------------------------------------------------------------------------
# τ-bench
# --------------------------------------------------------------------------------------------------
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


def _tau_messages(run: _TauRun) -> list[Message]:
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
                    arguments = action.get("arguments", {})
                    calls = [ToolCall(id=call_id, function=FunctionCall(name=action["name"], arguments=json.dumps(arguments)))]
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


def _tau_bench(path: Path, data: list[Any], result: ImportResult) -> list[Trajectory]:
    out = []
    for number, raw in enumerate(data):
        record = f"record [{number}]"
        if not isinstance(raw, dict):
            raise TrajectoryFormatError(path, f"expected an object, got {type(raw).__name__}", record=record)
        if isinstance(raw.get("task_id"), (int, str)):
            record += f" (task_id {raw['task_id']!r})"
        info = raw.get("info") if isinstance(raw.get("info"), dict) else {}
        if not raw.get("traj") and "error" in info:
            result.skipped.append(f"{path}: {record}: run errored ({str(info['error'])[:80]})")
            continue
        try:
            run = _TauRun.model_validate(raw)
        except ValidationError as exc:
            where, msg = _first_error(exc)
            raise TrajectoryFormatError(path, msg, record=record, field=where) from None
        gold_raw = ((run.info.get("task") or {}).get("actions")) if isinstance(run.info.get("task"), dict) else None
        gold = None
        if isinstance(gold_raw, list):
            gold = [
                {"name": a["name"], "arguments": a.get("kwargs") or a.get("arguments") or {}}
                for a in gold_raw
                if isinstance(a, dict) and isinstance(a.get("name"), str) and a["name"] != "respond"
            ]
        messages = _tau_messages(run)
        used = {c.function.name for m in messages for c in (m.tool_calls or [])} | {a["name"] for a in gold or []}
        domain = "airline" if used & _AIRLINE_TOOLS else "retail" if used & _RETAIL_TOOLS else None
        metadata: dict[str, Any] = {"trial": run.trial, "source_file": str(path)}
        if domain:
            metadata["domain"] = domain
        if gold is not None:
            metadata["gold_actions"] = gold
        task_id = str(run.task_id)
        out.append(Trajectory(
            id=f"{task_id}#{run.trial}" if run.trial is not None else f"{task_id}#{number}",
            target=f"tau-bench-{domain}" if domain else "tau-bench",
            task_id=task_id,
            messages=messages,
            reward=_clamp(run.reward),
            success=_is_success(run.reward),
            source="tau-bench",
            metadata=metadata,
        ))  # fmt: skip
    return out


# --------------------------------------------------------------------------------------------------
# our own format
# --------------------------------------------------------------------------------------------------
def _ours(path: Path, items: list[tuple[str, Any]]) -> list[Trajectory]:
    out = []
    for record, raw in items:
        if isinstance(raw, dict) and isinstance(raw.get("id"), str):
            record += f" (id {raw['id']!r})"
        try:
            out.append(Trajectory.model_validate(raw))
        except ValidationError as exc:
            where, msg = _first_error(exc)
            raise TrajectoryFormatError(path, msg, record=record, field=where) from None
    return out


def _jsonl_items(path: Path, text: str) -> list[tuple[str, Any]]:
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append((f"line {number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise TrajectoryFormatError(path, f"not valid JSON ({exc.msg} at column {exc.colno})", record=f"line {number}") from None
    return items


# --------------------------------------------------------------------------------------------------
# entry points
# --------------------------------------------------------------------------------------------------
def load_file(path: Path, result: ImportResult | None = None) -> list[Trajectory]:
    """Trajectories of one file (or τ² results folder), whatever its format."""
    result = result if result is not None else ImportResult()
    path = Path(path)
    if path.is_dir():
        result.formats["tau2-dir"] += 1
        return _tau2_dir(path)
    if not path.exists():
        raise TrajectoryFormatError(path, "no such file")
    if path.suffix == ".jsonl":
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise TrajectoryFormatError(path, "not a UTF-8 text file") from None
        result.formats["jsonl"] += 1
        return _ours(path, _jsonl_items(path, text))
    data = _read_json(path)
    if isinstance(data, _JsonLines):
        result.formats["jsonl"] += 1
        return _ours(path, _jsonl_items(path, data.text))
    if isinstance(data, dict):
        if "simulations" in data or "simulation_index" in data:
            result.formats["tau2"] += 1
            if not data.get("simulations") and (path.parent / "simulations").is_dir():
                return _tau2_dir(path)
            return _tau2_results(path, data)
        if "messages" in data and "termination_reason" in data and "task_id" in data:
            result.formats["tau2-simulation"] += 1
            return _tau2_results(path, {"simulations": [data]})
        if isinstance(data.get("trajectories"), list):
            result.formats["json"] += 1
            return _ours(path, [(f"trajectories[{i}]", t) for i, t in enumerate(data["trajectories"])])
        raise TrajectoryFormatError(
            path, "unrecognised JSON object: expected a τ² Results file (with 'simulations') or {'trajectories': [...]}"
        )
    if isinstance(data, list):
        if not data:
            return []
        first = data[0]
        if isinstance(first, dict) and "traj" in first:
            result.formats["tau-bench"] += 1
            return _tau_bench(path, data, result)
        if isinstance(first, dict) and "messages" in first:
            result.formats["json"] += 1
            return _ours(path, [(f"record [{i}]", t) for i, t in enumerate(data)])
        raise TrajectoryFormatError(path, "unrecognised JSON list: expected τ-bench results ({task_id, reward, info, traj}) or trajectories", record="record [0]")
    raise TrajectoryFormatError(path, f"unrecognised JSON {type(data).__name__}: expected an object or a list")


def load_trajectories(paths: list[Path]) -> ImportResult:
    """Trajectories of several files. Ids clashing across files are qualified with the file's stem."""
    result = ImportResult()
    per_file: list[tuple[Path, list[Trajectory]]] = []
    for path in paths:
        per_file.append((Path(path), load_file(Path(path), result)))
    counts = Counter(t.id for _, trajs in per_file for t in trajs)
    seen: set[str] = set()
    for path, trajs in per_file:
        for trajectory in trajs:
            tid = trajectory.id
            if counts[tid] > 1 and len(per_file) > 1:
                tid = f"{path.stem}:{tid}"
            base, n = tid, 1
            while tid in seen:  # duplicates inside one file
                n += 1
                tid = f"{base}~{n}"
            seen.add(tid)
            result.trajectories.append(trajectory if tid == trajectory.id else trajectory.model_copy(update={"id": tid}))
    return result


def write_jsonl(trajectories: list[Trajectory], path: Path) -> None:
    """Our own format: one ``Trajectory`` per line."""
    with Path(path).open("w", encoding="utf-8") as handle:
        for trajectory in trajectories:
            handle.write(trajectory.model_dump_json(exclude_none=True) + "\n")
