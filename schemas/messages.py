"""Chat messages and tool calls, in the OpenAI chat format every agent stack understands."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class FunctionCall(BaseModel):
    """The function part of a tool call. ``arguments`` is kept as the raw JSON string the model wrote."""

    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """Arguments as a dict; raises ``ValueError`` with the reason when they are not a JSON object."""
        try:
            value = json.loads(self.arguments) if self.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments are not valid JSON: {exc.msg} at position {exc.pos}") from None
        if not isinstance(value, dict):
            raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
        return value


class ToolCall(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(BaseModel):
    """One chat message. ``tool_call_id`` and ``name`` are set on tool results."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class AssistantTurn(BaseModel):
    """One agent action in an env: text, tool calls, or both."""

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
