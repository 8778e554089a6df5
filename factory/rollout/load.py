"""``--policy SPEC`` to a policy: the one place that knows every kind (scripted, local Hugging Face, any LLM).

Kept apart from ``policies`` so that ``hf`` can build on the policy types there without the two importing each other.
"""

from __future__ import annotations

from factory.rollout.hf import HFPolicy
from factory.rollout.policies import EmptyPolicy, GoldPolicy, LLMPolicy, Policy
from schemas.errors import FactoryError


def load_policy(spec: str, *, temperature: float | None = 0.0, max_tokens: int | None = None) -> Policy:
    """Build the policy a ``--policy`` spec names; bad specs raise ``FactoryError`` with the fix."""
    text = (spec or "").strip()
    if text in ("scripted:gold", "gold"):
        return GoldPolicy()
    if text in ("scripted:empty", "empty"):
        return EmptyPolicy()
    if text.startswith("scripted:"):
        raise FactoryError(f"unknown scripted policy {text!r}; use scripted:gold or scripted:empty")
    if text.startswith("hf:"):
        return HFPolicy.from_spec(text, temperature=temperature, max_new_tokens=max_tokens or 512)
    from llm_clients import LLMConfigError, make_client, parse_llm_spec

    try:
        client = make_client(parse_llm_spec(text), cache=False)
    except LLMConfigError as exc:
        raise FactoryError(f"--policy {text!r}: {exc}") from None
    return LLMPolicy(client, spec=text, temperature=temperature, max_tokens=max_tokens or 2048)
