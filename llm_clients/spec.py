"""Parse ``--llm PROVIDER:MODEL`` / ``--llm-base-url`` / env vars into an ``LLMSpec``, and build its client.

Spellings accepted:
- ``openai:gpt-4.1``, ``anthropic:claude-opus-4-5``
- ``vllm:Qwen/Qwen3-8B``, ``sglang:...``, ``ollama:llama3.1:8b``, ``compat:...`` (alias ``openai-compatible``):
  any OpenAI-compatible server; the base URL defaults to the server's usual local port
- a bare model name: ``claude-*`` means Anthropic, anything else OpenAI (or the compatible server when a
  base URL is given)

Environment: ``TRACE_LLM`` and ``TRACE_LLM_BASE_URL`` stand in for the flags; keys come from
``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` (a self-hosted server needs none).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field

from llm_clients.base import LLMClient, RetryPolicy
from llm_clients.cache import ResponseCache
from llm_clients.errors import LLMConfigError

Provider = Literal["openai", "anthropic", "openai-compatible"]

COMPATIBLE_DEFAULT_URLS = {
    "vllm": "http://127.0.0.1:8000/v1",
    "sglang": "http://127.0.0.1:30000/v1",
    "ollama": "http://127.0.0.1:11434/v1",
    "compat": None,
    "openai-compatible": None,
    "local": None,
}
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "openai-compatible": "OPENAI_API_KEY"}


class LLMSpec(BaseModel):
    """Which model to call and where. Holds no secret: keys are read from the environment when connecting."""

    provider: Provider
    model: str = Field(min_length=1)
    base_url: str | None = None

    def __str__(self) -> str:
        tail = f" @ {self.base_url}" if self.base_url else ""
        return f"{self.provider}:{self.model}{tail}"


def parse_llm_spec(
    spec: str | None = None, *, base_url: str | None = None, env: Mapping[str, str] | None = None
) -> LLMSpec:
    """Resolve flags, then ``TRACE_LLM`` / ``TRACE_LLM_BASE_URL``; raise ``LLMConfigError`` with a fix on bad input."""
    env = os.environ if env is None else env
    spec = (spec or env.get("TRACE_LLM") or "").strip()
    base_url = (base_url or env.get("TRACE_LLM_BASE_URL") or "").strip() or None
    if not spec:
        raise LLMConfigError("no LLM configured: pass --llm PROVIDER:MODEL (e.g. openai:gpt-4.1) or set TRACE_LLM")
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        raise LLMConfigError(f"LLM base URL must start with http:// or https://, got {base_url!r}")

    prefix, sep, rest = spec.partition(":")
    prefix_l = prefix.lower()
    if sep and prefix_l in ("openai", "anthropic"):
        provider: Provider = prefix_l  # type: ignore[assignment]
        model = rest
    elif sep and prefix_l in COMPATIBLE_DEFAULT_URLS:
        provider, model = "openai-compatible", rest
        base_url = base_url or COMPATIBLE_DEFAULT_URLS[prefix_l]
        if base_url is None:
            raise LLMConfigError(f"--llm {spec!r} needs --llm-base-url (or TRACE_LLM_BASE_URL) for the server's address")
    elif sep and "/" not in prefix and prefix_l.isalpha():
        known = ", ".join(["openai", "anthropic", *COMPATIBLE_DEFAULT_URLS])
        raise LLMConfigError(f"unknown LLM provider {prefix!r} in {spec!r}; known: {known}")
    else:  # a bare model name (which may itself contain ':' as Ollama tags do)
        model = spec
        if model.lower().startswith("claude"):
            provider = "anthropic"
        else:
            provider = "openai-compatible" if base_url else "openai"
    model = model.strip()
    if not model:
        raise LLMConfigError(f"--llm {spec!r} names no model; expected PROVIDER:MODEL")
    return LLMSpec(provider=provider, model=model, base_url=base_url)


def make_client(
    spec: LLMSpec,
    *,
    env: Mapping[str, str] | None = None,
    cache: ResponseCache | None | bool = True,
    retry: RetryPolicy | None = None,
    timeout_s: float = 120.0,
) -> LLMClient:
    """Build the client for a spec. ``cache=True`` uses the default cache folder, ``False``/``None`` none."""
    env = os.environ if env is None else env
    cache_obj = ResponseCache() if cache is True else (cache or None)
    common = {"cache": cache_obj, "retry": retry, "timeout_s": timeout_s}
    key = env.get(KEY_ENV[spec.provider])
    if spec.provider == "anthropic":
        if not key:
            raise LLMConfigError("ANTHROPIC_API_KEY is not set (needed for anthropic models)")
        from llm_clients.anthropic_client import AnthropicClient

        return AnthropicClient(spec.model, api_key=key, base_url=spec.base_url, **common)
    from llm_clients.openai_client import OpenAIClient

    if spec.provider == "openai":
        if not key and not spec.base_url:
            raise LLMConfigError("OPENAI_API_KEY is not set (needed for openai models)")
        return OpenAIClient(spec.model, api_key=key, base_url=spec.base_url, **common)
    return OpenAIClient(spec.model, api_key=key, base_url=spec.base_url, compatible=True, **common)
