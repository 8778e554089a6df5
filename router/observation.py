"""What the router reads of a task: its first observation, and chat messages in the form templates expect."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from router.errors import RouterError
from schemas.errors import validation_message
from schemas.messages import Message
from schemas.trajectory import Trajectory

Observation = str | Sequence[Message | dict[str, Any]] | Trajectory
"""A task as the router accepts it: plain text (one user message), chat messages, or a trajectory."""


def as_messages(observation: Observation) -> list[Message]:
    """Validate any accepted form into messages."""
    if isinstance(observation, Trajectory):
        return list(observation.messages)
    if isinstance(observation, str):
        return [Message(role="user", content=observation)]
    try:
        return [m if isinstance(m, Message) else Message.model_validate(m) for m in observation]
    except ValidationError as exc:
        raise RouterError(f"the task's messages are not chat messages ({validation_message(exc)})") from None


def first_observation(observation: Observation, include_system: bool = False) -> list[Message]:
    """The messages an agent sees before it first acts on the user's request: everything up to the first
    assistant message that follows a user message (τ²-bench opens with the agent's greeting, which is kept).

    System prompts are dropped unless asked for: on a target they hold the domain policy, the same for
    every task, so they carry no routing signal.
    """
    messages = as_messages(observation)
    head: list[Message] = []
    heard_user = False
    for message in messages:
        if message.role == "assistant" and heard_user:
            break
        heard_user = heard_user or message.role == "user"
        head.append(message)
    kept = [m for m in head if include_system or m.role != "system"]
    if not any(m.role == "user" and (m.content or "").strip() for m in kept):
        raise RouterError(
            "the task has no first observation to route on (no user message before the agent's first turn)"
        )
    return kept


def template_messages(messages: Sequence[Message], include_system: bool = True) -> list[dict[str, Any]]:
    """Messages as plain OpenAI-format dicts, ready for ``env_registry.conversation`` (which renders them
    exactly as training showed them to the model: call arguments as objects, calls and results written
    into the text where the template cannot render them)."""
    return [
        message.model_dump(mode="json", exclude_none=True)
        for message in messages
        if include_system or message.role != "system"
    ]


def clip(text: str, limit: int) -> str:
    """Cut long text, keeping its head, and say so."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 6)].rstrip() + "\n[...]"


def fingerprint(messages: Sequence[Message]) -> str:
    """A stable key for caching decisions of identical observations."""
    import hashlib

    payload = json.dumps([m.model_dump(mode="json", exclude_none=True) for m in messages], sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
