"""The agent's tool calls in a trajectory, each paired with its result: the unit both labelers reason over."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from schemas.messages import Message
from schemas.trajectory import Trajectory

_ERROR_PREFIX = re.compile(r"^\s*(error\b|exception\b|\[error\])", re.IGNORECASE)


@dataclass
class AgentCall:
    """One assistant tool call. ``arguments`` is None when the model wrote malformed JSON."""

    position: int
    message_index: int
    call_id: str
    name: str
    raw_arguments: str
    arguments: dict[str, Any] | None
    parse_error: str | None
    result: str | None = None
    result_index: int | None = None
    error: bool = False
    _parsed: Any = field(default=None, init=False, repr=False, compare=False)
    _has_parsed: bool = field(default=False, init=False, repr=False, compare=False)

    def result_json(self) -> Any:
        """The result parsed as JSON (parsed once), the plain text when it is not JSON, None when it cannot be read."""
        if not self._has_parsed:
            self._parsed, self._has_parsed = _parse_result(self.result), True
        return self._parsed

    @property
    def succeeded(self) -> bool:
        return self.result_index is not None and not self.error and self.arguments is not None


def _parse_result(text: str | None) -> Any:
    if not text:
        return None
    text = text.strip()
    if text[:1] not in "[{":
        return text
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None


def is_error_result(message: Message) -> bool:
    """τ² marks failed tool calls with ``error: true``; otherwise trust the text (``Error: ...``)."""
    flag = getattr(message, "error", None)
    if isinstance(flag, bool):
        return flag or bool(_ERROR_PREFIX.match(message.content or ""))
    content = message.content or ""
    if _ERROR_PREFIX.match(content):
        return True
    if content.startswith("{") and '"error"' in content[:40]:
        try:
            value = json.loads(content)
        except json.JSONDecodeError:
            return False
        return isinstance(value, dict) and set(value) <= {"error", "message", "code", "status"} and "error" in value
    return False


def agent_calls(trajectory: Trajectory) -> list[AgentCall]:
    """Assistant tool calls in order, with the tool message answering each (matched by id, else by order)."""
    calls: list[AgentCall] = []
    by_id: dict[str, AgentCall] = {}
    unanswered: list[AgentCall] = []
    for index, message in enumerate(trajectory.messages):
        if message.role == "assistant" and message.tool_calls:
            for call in message.tool_calls:
                try:
                    args = call.function.parsed_arguments()
                    problem = None
                except ValueError as exc:
                    args, problem = None, str(exc)
                item = AgentCall(len(calls), index, call.id, call.function.name, call.function.arguments, args, problem)
                calls.append(item)
                by_id.setdefault(call.id, item)
                unanswered.append(item)
        elif message.role == "tool" and getattr(message, "requestor", "assistant") == "assistant":
            target = by_id.get(message.tool_call_id or "")
            if target is None or target.result_index is not None:
                target = next((c for c in unanswered if c.result_index is None), None)
            if target is None:
                continue
            target.result = message.content
            target.result_index = index
            target.error = is_error_result(message)
            if target in unanswered:
                unanswered.remove(target)
    return calls


def final_reply(trajectory: Trajectory) -> str | None:
    """The agent's last text message, which is what the user was finally told."""
    for message in reversed(trajectory.messages):
        if message.role == "assistant" and message.content:
            return message.content
    return None
