"""Failures that are not the agent's fault: the task was corrected since the run, the simulated user ended or
derailed the episode, the infrastructure failed, or the episode ran out of steps with no agent error.

Such failures say nothing about what the agent lacks, so the statistics leave them out of the failures (D−)
unless ``--include-unattributable`` is given, and the report counts them by cause. Every rule looks at the
episode's own record (termination reason, messages, the task it used), never at the reward.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel

from factory.analyze.calls import agent_calls
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
    """The simulated user gave an id that its instructions do not contain and nobody had said before."""
    if task is None or not task.instructions:
        return None
    told = task.text() + " " + " ".join(str(v) for v in task.instructions.values())
    said = ""
    for message in trajectory.messages:
        text = message.content or ""
        if message.role == "user" and getattr(message, "requestor", None) != "user":
            for match in _IDS.finditer(text):
                token = match.group(1)
                if token not in told and token not in said:
                    return f"the simulated user gave {token!r}, which its instructions do not contain"
        said += " " + text + " " + " ".join(c.function.arguments for c in message.tool_calls or [])
    return None


def attribute(trajectory: Trajectory, task: TaskSpec | None, check: TaskCheck | None) -> Attribution:
    """Why a failed episode failed, as far as the record shows; ``agent`` unless a rule says otherwise."""
    meta = trajectory.metadata
    reason = str(meta.get("termination_reason") or "")
    infra = meta.get("infrastructure_error")
    if infra or reason == "infrastructure_error":
        return Attribution(attributable=False, cause="infrastructure", detail=str(infra or "termination_reason infrastructure_error")[:200])
    if reason == "user_error":
        return Attribution(attributable=False, cause="user_simulator", detail="the user simulator errored (termination_reason user_error)")
    if check is not None and check.status == "revised":
        return Attribution(attributable=False, cause="task_revised", detail=check.detail)
    ended = user_ended_while_asking(trajectory)
    if ended:
        return Attribution(attributable=False, cause="user_simulator", detail=ended)
    invented = user_invented_id(trajectory, task)
    if invented:
        return Attribution(attributable=False, cause="user_simulator", detail=invented)
    if reason == "max_steps" and not _agent_errors(trajectory):
        return Attribution(attributable=False, cause="max_steps", detail="max_steps reached with no failed or repeated agent call")
    return Attribution(attributable=True, cause="agent")
