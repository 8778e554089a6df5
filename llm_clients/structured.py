"""Ask for a JSON reply, validate it with pydantic (plus an optional check), and re-ask when it is malformed.

LLMs sometimes wrap JSON in prose or code fences, drop items or invent fields. Instead of failing the
whole job, the bad reply and the exact validation error go back to the model, which answers again, up to
``max_attempts`` times. Every exchange goes through the client, so it is cached like any other call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from llm_clients.base import LLMClient
from llm_clients.errors import LLMError
from llm_clients.types import LLMResponse
from schemas.errors import validation_message

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


class MalformedReplyError(LLMError):
    """The model never produced a valid reply within the allowed attempts."""

    def __init__(self, message: str, responses: list[LLMResponse]) -> None:
        super().__init__(message)
        self.responses = responses


def extract_json(text: str) -> Any:
    """The JSON value in a reply: the whole text, a fenced block, or the outermost ``{...}``/``[...]``."""
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    for open_, close in (("{", "}"), ("[", "]")):
        start, end = text.find(open_), text.rfind(close)
        if start != -1 and end > start:
            candidates.append(text[start : end + 1])
    last_error = "empty reply"
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return json.loads(candidate)
        except json.JSONDecodeError as exc:
            last_error = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    raise ValueError(f"reply is not JSON ({last_error})")


def _describe(exc: ValidationError) -> str:
    return validation_message(exc)


def complete_structured(
    client: LLMClient,
    messages: list[dict[str, Any]],
    model: type[T],
    *,
    system: str | None = None,
    check: Callable[[T], None] | None = None,
    max_attempts: int = 3,
    max_tokens: int = 2048,
    temperature: float | None = 0.0,
) -> tuple[T, list[LLMResponse]]:
    """Return the validated reply and every response it took. ``check`` raises ``ValueError`` to reject."""
    conversation = list(messages)
    responses: list[LLMResponse] = []
    problem = ""
    for _ in range(max(1, max_attempts)):
        response = client.complete(conversation, system=system, max_tokens=max_tokens, temperature=temperature)
        responses.append(response)
        try:
            value = model.model_validate(extract_json(response.text))
            if check is not None:
                check(value)
            return value, responses
        except ValidationError as exc:
            problem = _describe(exc)
        except ValueError as exc:
            problem = str(exc)
        conversation = conversation + [
            {"role": "assistant", "content": response.text},
            {
                "role": "user",
                "content": f"Your reply was invalid: {problem}. Reply again with only the corrected JSON object, no prose.",
            },
        ]
    raise MalformedReplyError(f"{client.describe()}: no valid reply after {len(responses)} attempts: {problem}", responses)
