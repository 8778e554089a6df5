"""An agent policy that acts in a hosted env: what it is told (:class:`PolicyContext`) and one served by an LLM.

The validation gate's calibration and the trainer's endpoint rollouts (``trainer.endpoint``) both drive a hosted
env with a model behind an OpenAI-compatible endpoint; the policy lives here, beside the conversation renderer
it writes with, so the trainer does not import the gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from env_registry import conversation
from llm_clients import LLMClient


@dataclass
class PolicyContext:
    """Where the policy is: which seed, which member of the group, which step."""

    seed: int
    rollout: int
    step: int


class Policy(Protocol):
    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: PolicyContext) -> Any: ...


def llm_policy(client: LLMClient, temperature: float = 1.0, max_tokens: int = 1024) -> Policy:
    """A policy served by an LLM endpoint. The conversation is written out as for every text-only reader
    (``env_registry.conversation.text_dialogue``: tools in the system text, calls and results in the Hermes
    format), so any chat model works; the env parses the reply text. Give it a client without a response
    cache, or the K samples of a group would all be the first one."""

    def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: PolicyContext) -> str:
        system, dialogue = conversation.text_dialogue(messages, tools)
        return client.complete(dialogue, system=system, max_tokens=max_tokens, temperature=temperature).text

    return act
