"""LLM clients shared by capability analysis, environment synthesis, LLM-played users and judges, and the trainer's
endpoint; below every package that calls a model, so none of them imports factory/ for it.

One interface (``LLMClient.complete``), three providers (OpenAI, Anthropic, any OpenAI-compatible server),
one spec syntax (``openai:gpt-4.1``), and for all of them: timeouts, retries with backoff, token and cost
accounting and an on-disk response cache.
"""

from llm_clients.base import LLMClient, RawCompletion, RetryPolicy
from llm_clients.cache import ResponseCache, default_cache_dir
from llm_clients.errors import (
    LLMConfigError,
    LLMConnectionError,
    LLMError,
    LLMRateLimitError,
    LLMRequestError,
    LLMServerError,
    LLMTimeoutError,
    LLMTransientError,
)
from llm_clients.pricing import PRICES, cost_usd, price_for
from llm_clients.spec import LLMSpec, make_client, parse_llm_spec
from llm_clients.structured import MalformedReplyError, complete_structured, extract_json
from llm_clients.types import LLMResponse, UsageTotals

__all__ = [
    "LLMClient",
    "LLMConfigError",
    "LLMConnectionError",
    "LLMError",
    "LLMRateLimitError",
    "LLMRequestError",
    "LLMResponse",
    "LLMServerError",
    "LLMSpec",
    "LLMTimeoutError",
    "LLMTransientError",
    "MalformedReplyError",
    "PRICES",
    "RawCompletion",
    "ResponseCache",
    "RetryPolicy",
    "UsageTotals",
    "complete_structured",
    "cost_usd",
    "default_cache_dir",
    "extract_json",
    "make_client",
    "parse_llm_spec",
    "price_for",
]
