"""LLM clients shared by capability analysis and environment synthesis.

One interface (``LLMClient.complete``), three providers (OpenAI, Anthropic, any OpenAI-compatible server),
one spec syntax (``openai:gpt-4.1``), and for all of them: timeouts, retries with backoff, token and cost
accounting and an on-disk response cache.
"""

from factory.llm.base import LLMClient, RawCompletion, RetryPolicy
from factory.llm.cache import ResponseCache, default_cache_dir
from factory.llm.errors import (
    LLMConfigError,
    LLMConnectionError,
    LLMError,
    LLMRateLimitError,
    LLMRequestError,
    LLMServerError,
    LLMTimeoutError,
    LLMTransientError,
)
from factory.llm.pricing import PRICES, cost_usd, price_for
from factory.llm.spec import LLMSpec, make_client, parse_llm_spec
from factory.llm.structured import MalformedReplyError, complete_structured, extract_json
from factory.llm.types import LLMResponse, UsageTotals

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
