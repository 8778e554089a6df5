"""Errors raised by LLM clients: one hierarchy, whatever the provider, so callers handle failures once."""

from __future__ import annotations

from schemas.errors import FactoryError


class LLMError(FactoryError):
    """Base class for every LLM client failure."""


class LLMConfigError(LLMError):
    """The client cannot be built: bad spec, missing API key, SDK not installed."""


class LLMRequestError(LLMError):
    """The provider refused the request for a reason retrying will not fix (400, 401, 404, ...)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMTransientError(LLMError):
    """A failure worth retrying: rate limit, server error, timeout, dropped connection."""

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class LLMRateLimitError(LLMTransientError):
    """HTTP 429."""


class LLMServerError(LLMTransientError):
    """HTTP 5xx (and Anthropic's 529 'overloaded')."""


class LLMTimeoutError(LLMTransientError):
    """No complete answer within the client's timeout."""


class LLMConnectionError(LLMTransientError):
    """The server could not be reached or dropped the connection."""
