"""OpenAI chat completions, and any OpenAI-compatible server (vLLM, SGLang, Ollama) by base URL."""

from __future__ import annotations

from typing import Any

from llm_clients._sdk_errors import translate
from llm_clients.base import LLMClient, RawCompletion
from llm_clients.errors import LLMConfigError, LLMRequestError


def _import_openai():
    try:
        import openai
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise LLMConfigError("the 'openai' package is not installed: pip install 'trace-factory[llm]'") from None
    return openai


class OpenAIClient(LLMClient):
    """``provider`` is ``openai`` for api.openai.com and ``openai-compatible`` for a self-hosted server.

    Self-hosted servers get ``max_tokens`` (what vLLM, SGLang and Ollama all accept); OpenAI itself gets
    ``max_completion_tokens``, which its reasoning models require.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None = None,
        compatible: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        self.provider = "openai-compatible" if compatible else "openai"
        self.base_url = base_url
        openai = _import_openai()
        self._sdk = openai
        self._client = openai.OpenAI(
            api_key=api_key or "EMPTY",
            base_url=base_url,
            timeout=self.timeout_s,
            max_retries=0,
        )

    def cache_identity(self) -> dict[str, Any]:
        identity = super().cache_identity()
        if self.provider == "openai-compatible":
            identity["base_url"] = self.base_url
        return identity

    def _cost(self, raw: RawCompletion):  # self-hosted models have no list price
        return None if self.provider == "openai-compatible" else super()._cost(raw)

    def _send(self, messages, *, system, max_tokens, temperature) -> RawCompletion:
        chat = ([{"role": "system", "content": system}] if system else []) + list(messages)
        params: dict[str, Any] = {"model": self.model, "messages": chat}
        if self.provider == "openai":
            params["max_completion_tokens"] = max_tokens
        else:
            params["max_tokens"] = max_tokens
        if temperature is not None:
            params["temperature"] = temperature
        try:
            result = self._client.chat.completions.create(**params)
        except self._sdk.OpenAIError as exc:
            raise translate(exc, self._sdk, self.describe()) from None
        choices = getattr(result, "choices", None) or []
        if not choices:
            raise LLMRequestError(f"{self.describe()}: reply has no choices")
        text = choices[0].message.content or ""
        usage = getattr(result, "usage", None)
        return RawCompletion(
            text=text,
            model=getattr(result, "model", None) or self.model,
            input_tokens=getattr(usage, "prompt_tokens", None) if usage else None,
            output_tokens=getattr(usage, "completion_tokens", None) if usage else None,
        )
