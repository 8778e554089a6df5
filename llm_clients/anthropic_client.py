"""Anthropic messages API through the official ``anthropic`` SDK."""

from __future__ import annotations

from typing import Any

from llm_clients._sdk_errors import translate
from llm_clients.base import LLMClient, RawCompletion, split_system
from llm_clients.errors import LLMConfigError


def _import_anthropic():
    try:
        import anthropic
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise LLMConfigError("the 'anthropic' package is not installed: pip install 'trace-factory[llm]'") from None
    return anthropic


class AnthropicClient(LLMClient):
    """Sends ``system`` separately, as the API requires.

    ``temperature`` is part of the cache key but is not sent: the ``anthropic`` SDK 2.x
    ``messages.create`` has no such parameter, and an unknown body field would be rejected.
    """

    provider = "anthropic"

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        anthropic = _import_anthropic()
        self._sdk = anthropic
        self.base_url = base_url
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=self.timeout_s, max_retries=0)

    def _send(self, messages, *, system, max_tokens, temperature) -> RawCompletion:
        system_text, chat = split_system(list(messages), system)
        params: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "messages": chat}
        if system_text:
            params["system"] = system_text
        try:
            result = self._client.messages.create(**params)
        except self._sdk.AnthropicError as exc:
            raise translate(exc, self._sdk, self.describe()) from None
        text = "".join(getattr(block, "text", "") for block in (result.content or []) if getattr(block, "type", "") == "text")
        usage = getattr(result, "usage", None)
        return RawCompletion(
            text=text,
            model=getattr(result, "model", None) or self.model,
            input_tokens=getattr(usage, "input_tokens", None) if usage else None,
            output_tokens=getattr(usage, "output_tokens", None) if usage else None,
        )
