"""Policies a rollout can run: scripted oracles, any LLM ``llm_clients`` can call, and local Hugging Face models.

A policy is asked for one action at a time: ``start(task, tools, seed)`` returns the episode's ``act``
function, which maps the messages so far (OpenAI format) to one assistant turn - raw text or an OpenAI
message, exactly what a target env's ``step`` accepts.

Specs (``--policy``):
- ``scripted:gold``   replays the task's gold actions, then tells the user what the task says must be
                      communicated, then stops (an oracle: it reads the task's answer key); on ToolSandbox,
                      whose scenarios define milestones rather than a script, the reference agent of the
                      target works through the milestones against the live state;
- ``scripted:empty``  stops at once, doing nothing;
- ``hf:PATH[@ADAPTER]`` a local transformers model (and PEFT adapter), chat template with tools;
- anything else is an LLM spec (``openai:gpt-4.1``, ``anthropic:claude-...``, ``vllm:Qwen/Qwen3-8B``).

LLM policies call tools in the Hermes/Qwen text protocol (``<tool_call>{...}</tool_call>``), which
``trace_env.actions`` parses: ``llm_clients`` clients exchange text, so one protocol serves every provider.
The conversation is written out by ``env_registry.conversation.text_dialogue``, the same rendering the
trainer, the endpoint rollouts and the calibration check use.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, Callable

from env_registry import conversation
from env_registry.targets.runner import AGENT_STOP
from env_registry.targets.tasks import Task
from schemas.errors import FactoryError

Action = str | dict[str, Any]
Act = Callable[[list[dict[str, Any]]], Action]


class PolicyError(FactoryError):
    """The policy could not produce an action (its LLM failed, its model could not run)."""


class Policy(ABC):
    spec: str = "abstract"

    @abstractmethod
    def start(self, task: Task, tools: list[dict[str, Any]], seed: int) -> Act:
        """The ``act`` function of one episode (policies may keep per-episode state in it)."""

    def close(self) -> None:
        """Release models or clients."""


class GoldPolicy(Policy):
    spec = "scripted:gold"

    def start(self, task: Task, tools: list[dict[str, Any]], seed: int) -> Act:
        reference = getattr(task, "reference_turn", None)  # a target that works its reference out live (ToolSandbox)
        if callable(reference):
            return lambda messages: reference()
        turns: list[Action] = [
            {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": a.name, "arguments": json.dumps(a.arguments)}}]}
            for a in task.gold_actions
        ]
        infos = (task.evaluation_criteria.communicate_info if task.evaluation_criteria else None) or []
        turns.append("Your request has been handled." + (" " + " ".join(str(i) for i in infos) if infos else ""))
        script = iter(turns)
        return lambda messages: next(script, AGENT_STOP)


class EmptyPolicy(Policy):
    spec = "scripted:empty"

    def start(self, task: Task, tools: list[dict[str, Any]], seed: int) -> Act:
        return lambda messages: AGENT_STOP


class LLMPolicy(Policy):
    """An API model through ``llm_clients`` (retries, usage accounting; uncached so trials stay independent).
    ``compact_tools``: tools as one signature line each, for a served adapter trained on that rendering."""

    def __init__(self, client: Any, spec: str, temperature: float | None = 0.0, max_tokens: int = 2048,
                 compact_tools: bool = False) -> None:  # fmt: skip
        self.client = client
        self.spec = spec
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.compact_tools = compact_tools

    def start(self, task: Task, tools: list[dict[str, Any]], seed: int) -> Act:
        from llm_clients import LLMError

        def act(messages: list[dict[str, Any]]) -> Action:
            system, dialogue = conversation.text_dialogue(messages, tools, self.compact_tools)
            try:
                response = self.client.complete(dialogue, system=system, max_tokens=self.max_tokens, temperature=self.temperature)
            except LLMError as exc:
                raise PolicyError(f"policy {self.client.describe()} failed: {exc}") from None
            return response.text

        return act
