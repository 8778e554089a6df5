"""The value every LLM call returns, and the running totals a client keeps."""

from __future__ import annotations

import threading

from pydantic import BaseModel, Field


class LLMResponse(BaseModel):
    """One completion. ``cached`` replies cost nothing: ``cost_usd`` is 0.0 for them."""

    text: str
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = Field(default=None, description="None when the model is not in the price table")
    cached: bool = False


class UsageTotals(BaseModel):
    """What a client has spent so far; ``cost_usd`` is None once any priced call had an unknown price."""

    calls: int = 0
    cached_calls: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0


class UsageTracker:
    """Thread-safe accumulator: labeling runs many calls in parallel on one client."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals = UsageTotals()

    def record(self, response: LLMResponse) -> None:
        with self._lock:
            t = self._totals
            t.calls += 1
            if response.cached:
                t.cached_calls += 1
                return
            t.input_tokens += response.input_tokens or 0
            t.output_tokens += response.output_tokens or 0
            if response.cost_usd is None or t.cost_usd is None:
                t.cost_usd = None
            else:
                t.cost_usd += response.cost_usd

    def record_retry(self) -> None:
        with self._lock:
            self._totals.retries += 1

    def snapshot(self) -> UsageTotals:
        with self._lock:
            return self._totals.model_copy()
