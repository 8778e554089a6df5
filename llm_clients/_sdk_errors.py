"""Map the OpenAI and Anthropic SDK exceptions (same shape in both) onto ``llm_clients.errors``."""

from __future__ import annotations

from types import ModuleType

from llm_clients.errors import (
    LLMConnectionError,
    LLMError,
    LLMRateLimitError,
    LLMRequestError,
    LLMServerError,
    LLMTimeoutError,
)


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def translate(exc: BaseException, sdk: ModuleType, where: str) -> LLMError:
    """The ``llm_clients`` error for an SDK exception; ``where`` names the provider and model."""
    if isinstance(exc, sdk.APITimeoutError):
        return LLMTimeoutError(f"{where}: request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        return LLMConnectionError(f"{where}: connection failed: {exc}")
    if isinstance(exc, sdk.APIStatusError):
        status = getattr(exc, "status_code", None)
        message = f"{where}: HTTP {status}: {_short(exc)}"
        if status == 429:
            return LLMRateLimitError(message, status=status, retry_after=_retry_after(exc))
        if status is not None and (status >= 500 or status == 408):
            return LLMServerError(message, status=status, retry_after=_retry_after(exc))
        return LLMRequestError(message, status=status)
    return LLMRequestError(f"{where}: {type(exc).__name__}: {exc}")


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
