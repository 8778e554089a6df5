"""The one LLM interface the factory uses, with caching, retries and accounting done once for all providers.

Retries are a plain loop here, not the SDKs' own: the SDKs are built with ``max_retries=0`` so every
provider backs off the same way (exponential, capped, with jitter, honouring ``Retry-After``), and the
attempts are counted in the client's usage totals. Retried: HTTP 429, 5xx, timeouts and dropped
connections. Anything else (400, 401, 404, ...) fails at once with ``LLMRequestError``.
"""

from __future__ import annotations

import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from llm_clients.cache import ResponseCache, request_key
from llm_clients.errors import LLMTransientError
from llm_clients.pricing import cost_usd
from llm_clients.types import LLMResponse, UsageTotals, UsageTracker


class RetryPolicy(BaseModel):
    """``max_retries`` extra attempts after the first; delay = min(max_delay, base * 2**n) plus up to 25% jitter."""

    max_retries: int = Field(default=4, ge=0)
    base_delay_s: float = Field(default=1.0, ge=0)
    max_delay_s: float = Field(default=30.0, ge=0)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(self.max_delay_s, max(0.0, retry_after))
        base = min(self.max_delay_s, self.base_delay_s * (2**attempt))
        return base * (1.0 + random.random() * 0.25)


@dataclass
class RawCompletion:
    """What a provider returns before accounting."""

    text: str
    model: str
    input_tokens: int | None
    output_tokens: int | None


class LLMClient(ABC):
    """``complete(messages, system=..., max_tokens=..., temperature=...) -> LLMResponse``.

    ``messages`` are ``{"role": "user"|"assistant", "content": str}`` dicts. Subclasses implement ``_send``
    and translate their SDK's exceptions into ``llm_clients.errors``.
    """

    provider: str = "abstract"

    def __init__(
        self,
        model: str,
        *,
        cache: ResponseCache | None = None,
        retry: RetryPolicy | None = None,
        timeout_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.cache = cache
        self.retry = retry or RetryPolicy()
        self.timeout_s = timeout_s
        self._sleep = sleep
        self._usage = UsageTracker()
        self._local = threading.local()

    # -- identity -------------------------------------------------------------------------------
    def describe(self) -> str:
        return f"{self.provider}:{self.model}"

    def cache_identity(self) -> dict[str, Any]:
        """What, besides the request, decides the answer (a self-hosted endpoint adds its URL)."""
        return {"provider": self.provider, "model": self.model}

    @property
    def usage(self) -> UsageTotals:
        return self._usage.snapshot()

    # -- the call -------------------------------------------------------------------------------
    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        system: str | None = None,
        max_tokens: int = 1024,
        temperature: float | None = 0.0,
    ) -> LLMResponse:
        material = {
            **self.cache_identity(),
            "system": system,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        key = request_key(material)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                response = hit.model_copy(update={"cached": True, "cost_usd": 0.0})
                self._usage.record(response)
                return response

        attempt = 0
        while True:
            try:
                raw = self._send(messages, system=system, max_tokens=max_tokens, temperature=temperature)
                break
            except LLMTransientError as exc:
                if attempt >= self.retry.max_retries:
                    exc.args = (f"{exc.args[0] if exc.args else exc} (gave up after {attempt + 1} attempts)",)
                    raise
                self._usage.record_retry()
                self._sleep(self.retry.delay(attempt, exc.retry_after))
                attempt += 1

        response = LLMResponse(
            text=raw.text,
            model=raw.model or self.model,
            input_tokens=raw.input_tokens,
            output_tokens=raw.output_tokens,
            cost_usd=self._cost(raw),
            cached=False,
        )
        if self.cache is not None:
            self.cache.put(key, response, material)
        self._usage.record(response)
        return response

    def _cost(self, raw: RawCompletion) -> float | None:
        return cost_usd(self.model, raw.input_tokens, raw.output_tokens)

    @abstractmethod
    def _send(
        self, messages: list[dict[str, Any]], *, system: str | None, max_tokens: int, temperature: float | None
    ) -> RawCompletion:
        """One HTTP round trip; raise ``LLMTransientError`` subclasses for retryable failures."""


def split_system(messages: list[dict[str, Any]], system: str | None) -> tuple[str | None, list[dict[str, Any]]]:
    """Fold any ``role: system`` messages into the system prompt (Anthropic takes it separately)."""
    parts = [system] if system else []
    rest = []
    for message in messages:
        if message.get("role") == "system":
            if message.get("content"):
                parts.append(str(message["content"]))
        else:
            rest.append(message)
    return ("\n\n".join(parts) if parts else None), rest
