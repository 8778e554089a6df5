"""Offline labeler: labels the built-in capabilities on τ²-style tasks by comparing the agent's tool calls
with the task's gold actions and the tools' read/write types. No LLM, deterministic, fast.

How it compares. Only state-changing gold actions (write tools) are matched argument by argument, because
τ² grades the final database: a read with an odd argument does no harm if the writes are right. Each gold
write is matched to the agent's calls of the same tool: *satisfied* (a successful call with equal
arguments; ``compare_args`` respected, 50 == 50.0), *failed* (equal arguments but the tool returned an
error), *mismatch* (the closest call of that tool has different arguments) or *missing* (no call of that
tool left). A successful agent write not matched to any gold write is an *extra write*. A differing
argument value is a *date* when it looks like ``YYYY-MM-DD``; it is *seen data* when the agent's value
occurs in an earlier tool result or user message (so the agent copied it from the wrong record).

The rules, one function each (their docstrings are also printed in the Markdown report):
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from factory.analyze.calls import AgentCall, agent_calls
from factory.analyze.gold import GoldAction, GoldIndex
from factory.analyze.toolinfo import ToolCatalog, catalog_for_target
from schemas.capability import CapabilityLabel, TrajectoryLabel
from schemas.trajectory import Trajectory

NA, PRESENT, LACKING = CapabilityLabel.NA, CapabilityLabel.PRESENT, CapabilityLabel.LACKING
TRANSFER = "transfer_to_human_agents"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?$")
_TOKEN = re.compile(r"[#\w][\w.@#+-]*")
_MISSING = object()


# --------------------------------------------------------------------------------------------------
# evidence: everything the rules look at, computed once per trajectory
# --------------------------------------------------------------------------------------------------
def _norm(value: Any) -> str:
    if isinstance(value, bool):
        return f"b:{value}"
    if isinstance(value, (int, float)):
        return f"n:{float(value)!r}"
    text = str(value).strip()
    try:
        return f"n:{float(text)!r}"
    except ValueError:
        return f"s:{text}"


def _equal(gold: Any, agent: Any) -> bool:
    if isinstance(gold, dict) and isinstance(agent, dict):
        return all(_equal(v, agent.get(k, _MISSING)) for k, v in gold.items()) and set(gold) == set(agent)
    if isinstance(gold, list) and isinstance(agent, list):
        return len(gold) == len(agent) and all(_equal(a, b) for a, b in zip(gold, agent))
    if agent is _MISSING:
        return False
    if isinstance(gold, (dict, list)) or isinstance(agent, (dict, list)):
        return False
    return _norm(gold) == _norm(agent)


@dataclass
class Diff:
    path: str
    gold: Any
    agent: Any
    kind: str = "precision"  # "date" | "seen" | "precision"


@dataclass
class GoldMatch:
    action: GoldAction
    status: str  # satisfied | failed | mismatch | missing
    call: AgentCall | None = None
    diffs: list[Diff] = field(default_factory=list)


def _compared(action: GoldAction) -> dict[str, Any]:
    if action.compare_args is None:
        return action.arguments
    return {k: action.arguments[k] for k in action.compare_args if k in action.arguments}


def _args_match(action: GoldAction, arguments: dict[str, Any] | None) -> bool:
    if arguments is None:
        return False
    return all(_equal(v, arguments.get(k, _MISSING)) for k, v in _compared(action).items())


def _diffs(gold: Any, agent: Any, path: str) -> list[Diff]:
    if isinstance(gold, dict) and isinstance(agent, dict):
        out = []
        for key, value in gold.items():
            out += _diffs(value, agent.get(key, _MISSING), f"{path}.{key}" if path else key)
        return out
    if isinstance(gold, list) and isinstance(agent, list) and len(gold) == len(agent):
        out = []
        for i, (a, b) in enumerate(zip(gold, agent)):
            out += _diffs(a, b, f"{path}[{i}]")
        return out
    return [] if _equal(gold, agent) else [Diff(path, gold, None if agent is _MISSING else agent)]


def _is_date(value: Any) -> bool:
    return isinstance(value, str) and bool(_DATE.match(value.strip()))


def _scalars(value: Any, out: set[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            out.add(_norm(key))
            _scalars(item, out)
    elif isinstance(value, list):
        for item in value:
            _scalars(item, out)
    elif value is not None:
        out.add(_norm(value))


def _text_values(text: str | None) -> set[str]:
    out: set[str] = set()
    if not text:
        return out
    stripped = text.strip()
    if stripped[:1] in "[{":
        try:
            _scalars(json.loads(stripped), out)
            return out
        except json.JSONDecodeError:
            pass
    for token in _TOKEN.findall(text):
        out.add(_norm(token.rstrip(".")))
    return out


@dataclass
class Evidence:
    trajectory: Trajectory
    catalog: ToolCatalog
    gold: list[GoldAction] | None
    calls: list[AgentCall]
    matches: list[GoldMatch] = field(default_factory=list)
    extra_writes: list[AgentCall] = field(default_factory=list)
    _seen_cache: dict[int, set[str]] = field(default_factory=dict)

    @property
    def gold_writes(self) -> list[GoldAction]:
        return [a for a in self.gold or [] if self.catalog.is_write(a.name)]

    def seen_before(self, message_index: int) -> set[str]:
        """Values the agent had seen (user messages, tool results) before the given message."""
        if message_index not in self._seen_cache:
            seen: set[str] = set()
            for message in self.trajectory.messages[:message_index]:
                if message.role in ("user", "tool"):
                    seen |= _text_values(message.content)
            self._seen_cache[message_index] = seen
        return self._seen_cache[message_index]


def build_evidence(trajectory: Trajectory, gold: list[GoldAction] | None, catalog: ToolCatalog | None = None) -> Evidence:
    catalog = catalog or catalog_for_target(trajectory.target)
    evidence = Evidence(trajectory, catalog, gold, agent_calls(trajectory))
    writes = [c for c in evidence.calls if catalog.is_write(c.name)]
    used: set[int] = set()
    if gold is not None:
        pending = list(evidence.gold_writes)
        results: dict[int, GoldMatch] = {}
        # 1. satisfied: a successful call with equal arguments
        for i, action in enumerate(pending):
            call = next((c for c in writes if c.position not in used and c.name == action.name and c.succeeded and _args_match(action, c.arguments)), None)
            if call is not None:
                used.add(call.position)
                results[i] = GoldMatch(action, "satisfied", call)
        # 2. failed: equal arguments, but every such call errored (all identical retries are consumed)
        for i, action in enumerate(pending):
            if i in results:
                continue
            same = [c for c in writes if c.position not in used and c.name == action.name and _args_match(action, c.arguments)]
            if same:
                used.update(c.position for c in same)
                results[i] = GoldMatch(action, "failed", same[0])
        # 3. mismatch: the closest remaining call of the same tool
        for i, action in enumerate(pending):
            if i in results:
                continue
            candidates = [c for c in writes if c.position not in used and c.name == action.name]
            if not candidates:
                results[i] = GoldMatch(action, "missing")
                continue
            compared = _compared(action)

            def closeness(call: AgentCall) -> tuple[int, int, int]:
                args = call.arguments or {}
                same_keys = sum(1 for k, v in compared.items() if _equal(v, args.get(k, _MISSING)))
                return (same_keys, int(call.succeeded), -call.position)

            call = max(candidates, key=closeness)
            used.add(call.position)
            diffs = _diffs(compared, call.arguments if call.arguments is not None else {}, "")
            seen = evidence.seen_before(call.message_index)
            for diff in diffs:
                if _is_date(diff.gold) or _is_date(diff.agent):
                    diff.kind = "date"
                elif diff.agent is not None and not isinstance(diff.agent, (dict, list)) and _norm(diff.agent) in seen:
                    diff.kind = "seen"
            results[i] = GoldMatch(action, "mismatch", call, diffs)
        evidence.matches = [results[i] for i in range(len(pending))]
        evidence.extra_writes = [c for c in writes if c.position not in used and c.succeeded]
    return evidence


def _fmt_call(call: AgentCall) -> str:
    args = call.arguments or {}
    key = next((k for k in args if k.endswith("_id")), None)
    return f"{call.name}({key}={args[key]!r})" if key else f"{call.name}(...)"


Verdict = tuple[CapabilityLabel, str]


# --------------------------------------------------------------------------------------------------
# the rules
# --------------------------------------------------------------------------------------------------
def rule_multi_step_task_completion(ev: Evidence) -> Verdict:
    """LACKING when a write the gold requires was never attempted (no call of that tool at all), i.e. the
    agent stopped before finishing the job. PRESENT when every required write was attempted. NA without gold
    actions or when the task requires no write."""
    if ev.gold is None or not ev.gold_writes:
        return NA, "no required write in the gold actions" if ev.gold is not None else "no gold actions"
    missing = [m.action.name for m in ev.matches if m.status == "missing"]
    if missing:
        return LACKING, f"required write never made: {', '.join(missing)}"
    return PRESENT, f"all {len(ev.gold_writes)} required write(s) attempted"


def rule_tool_calling_precision(ev: Evidence) -> Verdict:
    """LACKING when any call has malformed JSON arguments, names a tool the target does not have, or breaks
    the tool's schema (missing required field, wrong type, value outside an enum); or when the right tool was
    called for a required write with an argument that differs from the gold and is neither a date nor a value
    the agent had seen (an invented, mistyped or incomplete value). PRESENT otherwise; NA with no tool call."""
    if not ev.calls:
        return NA, "no tool calls"
    for call in ev.calls:
        if call.arguments is None:
            return LACKING, f"{call.name}: malformed arguments ({call.parse_error})"
        if ev.catalog.knows(call.name) is False:
            return LACKING, f"called unknown tool {call.name!r}"
        problems = ev.catalog.schema_errors(call.name, call.arguments)
        if problems:
            return LACKING, f"{call.name}: {problems[0]}"
    for match in ev.matches:
        wrong = [d for d in match.diffs if d.kind == "precision"]
        if wrong:
            d = wrong[0]
            shown = "missing" if d.agent is None else repr(d.agent)
            return LACKING, f"{match.action.name}: {d.path} = {shown}, expected {d.gold!r}"
    return PRESENT, f"{len(ev.calls)} call(s) well-formed"


def rule_structured_data_reasoning(ev: Evidence) -> Verdict:
    """LACKING when a required write was made with an argument value (an id, a price, a flight) that the agent
    had seen in an earlier tool result or user message but that is not the gold value: it read the data and
    picked the wrong record. PRESENT when the attempted required writes carry the right values. NA without gold
    actions or when no required write was attempted."""
    attempted = [m for m in ev.matches if m.status != "missing"]
    if ev.gold is None or not attempted:
        return NA, "no gold actions" if ev.gold is None else "no required write attempted"
    for match in attempted:
        wrong = [d for d in match.diffs if d.kind == "seen"]
        if wrong:
            d = wrong[0]
            return LACKING, f"{match.action.name}: used {d.agent!r} from the data for {d.path}, expected {d.gold!r}"
    return PRESENT, "values carried from the data into writes correctly"


def rule_datetime_reasoning(ev: Evidence) -> Verdict:
    """LACKING when a required write that carries a date was made with a different date. PRESENT when such
    writes have the right dates. NA when no attempted required write carries a date (``YYYY-MM-DD``)."""
    if ev.gold is None:
        return NA, "no gold actions"
    dated = [m for m in ev.matches if m.status != "missing" and _has_date(_compared(m.action))]
    if not dated:
        return NA, "no dated write attempted"
    for match in dated:
        wrong = [d for d in match.diffs if d.kind == "date"]
        if wrong:
            d = wrong[0]
            return LACKING, f"{match.action.name}: {d.path} = {d.agent!r}, expected {d.gold!r}"
    return PRESENT, "dates in writes are right"


def rule_precondition_verification(ev: Evidence) -> Verdict:
    """LACKING when the agent changed state it had not checked: a successful write the gold does not contain
    (e.g. cancelling or compensating when the policy forbids it), or a write to a record (its first ``*_id``
    argument, payments aside) that no earlier successful read was asked about. PRESENT when every successful
    write is required and was preceded by a read of its record. NA when the agent made no successful write.
    Without gold actions only the read-before-write check applies."""
    writes = [c for c in ev.calls if ev.catalog.is_write(c.name) and c.succeeded]
    if not writes:
        return NA, "no state-changing call"
    extra = {c.position for c in ev.extra_writes}
    for call in writes:
        key = ev.catalog.primary_key(call.name, call.arguments or {})
        value = (call.arguments or {}).get(key) if key else None
        checked = value is None or any(
            c.position < call.position and c.succeeded and ev.catalog.is_read(c.name) and _mentions(c.arguments, value)
            for c in ev.calls
        )
        if call.position in extra:
            how = "without reading that record first" if not checked else "although its record had been read"
            return LACKING, f"{_fmt_call(call)} is not called for by the task, made {how}"
        if not checked:
            return LACKING, f"{_fmt_call(call)} made before any read of {value!r}"
    return PRESENT, f"{len(writes)} write(s), each required and checked first"


def rule_permission_error_recovery(ev: Evidence) -> Verdict:
    """LACKING when, after a tool error, the agent's next call repeats the identical failing call, or (with
    gold) a required write ended in error and was never made successfully. PRESENT when every error was
    followed by a changed call, an alternative or an explanation. NA when no tool call failed."""
    failed = [c for c in ev.calls if c.error]
    if not failed:
        return NA, "no tool errors"
    for call in failed:
        later = [c for c in ev.calls if c.position > call.position]
        if later and later[0].name == call.name and later[0].raw_arguments == call.raw_arguments:
            return LACKING, f"repeated the failing call {_fmt_call(call)}"
    for match in ev.matches:
        if match.status == "failed":
            return LACKING, f"required {match.action.name} failed and was never made successfully"
    return PRESENT, f"recovered from {len(failed)} tool error(s)"


def rule_escalation_judgment(ev: Evidence) -> Verdict:
    """LACKING when the gold transfers to a human agent and the agent did not, or the agent transferred when the
    gold does not. PRESENT when both transfer. NA when neither does, or without gold actions."""
    if ev.gold is None:
        return NA, "no gold actions"
    gold_transfer = any(a.name == TRANSFER for a in ev.gold)
    agent_transfer = any(c.name == TRANSFER for c in ev.calls)
    if gold_transfer and not agent_transfer:
        return LACKING, "did not transfer to a human agent when the policy required it"
    if agent_transfer and not gold_transfer:
        return LACKING, "transferred a request it should have handled"
    if gold_transfer:
        return PRESENT, "transferred as required"
    return NA, "no transfer involved"


def _has_date(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_date(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_date(v) for v in value)
    return _is_date(value)


def _mentions(arguments: dict[str, Any] | None, value: Any) -> bool:
    if not arguments:
        return False
    found: set[str] = set()
    _scalars(arguments, found)
    return _norm(value) in found


RULES: dict[str, Callable[[Evidence], Verdict]] = {
    "precondition_verification": rule_precondition_verification,
    "structured_data_reasoning": rule_structured_data_reasoning,
    "tool_calling_precision": rule_tool_calling_precision,
    "multi_step_task_completion": rule_multi_step_task_completion,
    "permission_error_recovery": rule_permission_error_recovery,
    "datetime_reasoning": rule_datetime_reasoning,
    "escalation_judgment": rule_escalation_judgment,
}


def rule_documentation() -> dict[str, str]:
    """Each rule's docstring, for the Markdown report (one source of truth for the rules' wording)."""
    return {name: " ".join(inspect.getdoc(rule).split()) for name, rule in RULES.items()}


class OfflineLabeler:
    """Labels every built-in capability without an LLM. Deterministic: N runs give identical labels."""

    deterministic = True
    name = "offline"

    def __init__(self, gold_index: GoldIndex | None = None) -> None:
        self.gold_index = gold_index or GoldIndex()

    def supports(self, capability: str) -> bool:
        return capability in RULES

    def label(self, trajectory: Trajectory, capabilities: list[str]) -> list[TrajectoryLabel]:
        evidence = build_evidence(trajectory, self.gold_index.for_trajectory(trajectory))
        labels = []
        for name in capabilities:
            rule = RULES.get(name)
            verdict, reason = rule(evidence) if rule else (NA, "no offline rule for this capability")
            labels.append(TrajectoryLabel(trajectory_id=trajectory.id, capability=name, label=verdict, reason=reason))
        return labels

    def has_gold(self, trajectory: Trajectory) -> bool:
        return self.gold_index.for_trajectory(trajectory) is not None
