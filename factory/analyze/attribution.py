"""Failures that are not the agent's fault: the task was corrected since the run, the simulated user ended or
derailed the episode, the infrastructure failed, or the episode ran out of steps with no agent error.

Such failures say nothing about what the agent lacks, so the statistics leave them out of the failures (D−)
unless ``--include-unattributable`` is given, and the report counts them by cause. Every rule looks at the
episode's own record (termination reason, messages, the task it used), never at the reward.
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import BaseModel

from factory.analyze.calls import agent_calls
from factory.analyze.conversation import dates_in
from factory.analyze.revisions import TaskCheck
from factory.analyze.tasks import TaskSpec
from schemas.trajectory import Trajectory

Cause = Literal["agent", "task_revised", "user_simulator", "infrastructure", "max_steps"]
CAUSE_TEXT: dict[str, str] = {
    "task_revised": "task revised since the run",
    "user_simulator": "user simulator ended or derailed the episode",
    "infrastructure": "infrastructure error",
    "max_steps": "ran out of steps with no agent error",
}
STOP_TOKENS = re.compile(r"###(STOP|TRANSFER|OUT-OF-SCOPE)###")
_ASK = re.compile(
    r"\b(yes\b.{0,40}\b(please|go ahead|proceed|confirm)|i confirm|go ahead|proceed|please (do|book|cancel|change|modify|update|upgrade|"
    r"add|exchange|return|process|complete|finali[sz]e|make|issue|send|confirm))",
    re.IGNORECASE,
)
_NEGATION = re.compile(r"\b(no|not|never|cannot|rather not|instead)\b|n['’]t\b", re.IGNORECASE)
_ASK_TRANSFER = re.compile(r"\b(yes|please|go ahead|proceed)\b[^.!?]{0,30}\btransfer", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WRITE_NAMES = {
    "book_reservation", "cancel_reservation", "send_certificate", "update_reservation_baggages", "update_reservation_flights",
    "update_reservation_passengers", "cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_address",
    "modify_pending_order_items", "modify_pending_order_payment", "modify_user_address", "return_delivered_order_items",
}  # fmt: skip
_BIRTH = re.compile(r"\b(born|birth|dob|date of birth)\b", re.IGNORECASE)
_IDS = re.compile(r"(?<![\w#])(#W\d{7}|[a-z]+_[a-z]+_\d{3,5}|(?=[A-Z0-9]{6}\b)(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6})\b")


class Attribution(BaseModel):
    attributable: bool
    cause: Cause
    detail: str = ""


def _agent_errors(trajectory: Trajectory) -> bool:
    """Any failed tool call, or the agent repeating one call verbatim (a loop)."""
    calls = agent_calls(trajectory)
    if any(c.error or c.arguments is None for c in calls):
        return True
    keys = [(c.name, c.raw_arguments) for c in calls]
    return len(keys) != len(set(keys))


def _user_messages(trajectory: Trajectory) -> list[tuple[int, str]]:
    return [(i, m.content or "") for i, m in enumerate(trajectory.messages) if m.role == "user" and getattr(m, "requestor", None) != "user"]


def asks_to_act(text: str) -> str | None:
    """The first sentence that asks the agent to go ahead with something other than a transfer."""
    for sentence in _SENTENCE.split(text):
        if _ASK.search(sentence) and not _NEGATION.search(sentence) and not _ASK_TRANSFER.search(sentence):
            return sentence.strip()
    return None


def user_ended_while_asking(trajectory: Trajectory) -> str | None:
    """The user's final message asks the agent to go ahead and ends the episode in the same breath, so the
    agent never got to act (or the user ended the episode in its very first message)."""
    users = _user_messages(trajectory)
    if not users:
        return None
    index, text = users[-1]
    if not STOP_TOKENS.search(text) or any(m.role == "assistant" for m in trajectory.messages[index + 1 :]):
        return None
    if len(users) == 1:
        return "the simulated user ended the episode in its first message"
    ask = asks_to_act(STOP_TOKENS.sub("", text))
    if ask is None:
        return None
    return f"the simulated user asked the agent to go ahead and ended the episode in the same message ({ask[:70]!r})"


def user_invented_id(trajectory: Trajectory, task: TaskSpec | None) -> str | None:
    """The simulated user gave an id or a date of birth that its instructions do not contain and nobody had
    said before: it made it up, and the episode no longer tests the agent on the task."""
    if task is None or not task.instructions:
        return None
    told = task.text() + " " + " ".join(str(v) for v in task.instructions.values())
    told_dates = dates_in(told)
    said = ""
    for message in trajectory.messages:
        text = message.content or ""
        if message.role == "user" and getattr(message, "requestor", None) != "user":
            for match in _IDS.finditer(text):
                token = match.group(1)
                if token not in told and token not in said:
                    return f"the simulated user gave {token!r}, which its instructions do not contain"
            for match in _BIRTH.finditer(text):
                for date in dates_in(text[match.start() : match.end() + 40]) - told_dates - dates_in(said):
                    return f"the simulated user gave a date of birth, {date}, which its instructions do not contain"
        said += " " + text + " " + " ".join(c.function.arguments for c in message.tool_calls or [])
    return None


def _canonical(value: object) -> object:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return str(value).strip()


def matches_corrected_task(trajectory: Trajectory, reference: TaskSpec) -> bool:
    """Whether the run made exactly the corrected task's changes (and said its required facts), so that the
    old gold alone explains its failure. Used for attribution only, never for a label."""
    made = sorted(json.dumps([c.name, _canonical(c.arguments)], sort_keys=True) for c in agent_calls(trajectory) if c.succeeded and c.name in _WRITE_NAMES)
    wanted = sorted(json.dumps([a.name, _canonical(a.arguments)], sort_keys=True) for a in reference.gold_actions or [] if a.name in _WRITE_NAMES)
    if made != wanted:
        return False
    said = " ".join(m.content or "" for m in trajectory.messages if m.role == "assistant").replace(",", "")
    return all(str(v).replace(",", "") in said for v in reference.communicate_info)


def attribute(trajectory: Trajectory, task: TaskSpec | None, check: TaskCheck | None, reference: TaskSpec | None = None) -> Attribution:
    """Why a failed episode failed, as far as the record shows; ``agent`` unless a rule says otherwise.

    A task revised since the run is not the agent's fault when the run does what the corrected task asks, or
    when no corrected task is at hand to tell (the conservative default); a run that misses the corrected task
    too is still the agent's failure."""
    meta = trajectory.metadata
    reason = str(meta.get("termination_reason") or "")
    infra = meta.get("infrastructure_error")
    if reason == "user_error":
        detail = f": {infra}" if infra else ""
        return Attribution(attributable=False, cause="user_simulator", detail=f"the user simulator errored (termination_reason user_error){detail}"[:200])
    if infra or reason == "infrastructure_error":
        return Attribution(attributable=False, cause="infrastructure", detail=str(infra or "termination_reason infrastructure_error")[:200])
    if meta.get("internal_error") or reason == "internal_error":  # `factory rollout`: its own code failed mid-episode
        return Attribution(attributable=False, cause="infrastructure", detail=f"rollout internal error: {meta.get('internal_error') or 'termination_reason internal_error'}"[:200])
    if check is not None and check.status == "revised":
        if reference is None or reference.gold_actions is None:
            return Attribution(attributable=False, cause="task_revised", detail=check.detail)
        if matches_corrected_task(trajectory, reference):
            return Attribution(attributable=False, cause="task_revised", detail=f"{check.detail}; the run does what the corrected task asks")
        revised_note = f"{check.detail}, but the run misses the corrected task too"
    else:
        revised_note = ""
    ended = user_ended_while_asking(trajectory)
    if ended:
        return Attribution(attributable=False, cause="user_simulator", detail=ended)
    invented = user_invented_id(trajectory, task)
    if invented:
        return Attribution(attributable=False, cause="user_simulator", detail=invented)
    if reason == "max_steps" and not _agent_errors(trajectory):
        return Attribution(attributable=False, cause="max_steps", detail="max_steps reached with no failed or repeated agent call")
    return Attribution(attributable=True, cause="agent", detail=revised_note)
