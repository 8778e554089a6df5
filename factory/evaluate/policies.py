"""The arms' policies, host side: every arm drives the same model, only the adapter applied differs.

- :class:`SharedModel` is one transformers model with every adapter loaded once (``router.AdapterSet``);
  each generation applies its arm's adapter (or none) under one lock, so episodes running in parallel
  threads never see another arm's adapter. The router reads the same model with adapters disabled.
- :class:`ServedModel` is an OpenAI-compatible server (vLLM ``--enable-lora``) that serves the base model
  and each adapter under its capability's name; an arm is the ``model`` field of its requests.
- :class:`RoutedPolicy` routes a task on its first observation, then acts as that arm's policy.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from env_registry.targets.tasks import Task
from factory.rollout.policies import Act, Policy, PolicyError
from router.errors import RouterError
from router.schema import RouteDecision

Choice = RouteDecision | str | None
"""What an arm applies: None (base model), a capability's adapter, or a routing decision (soft mixes too)."""


class SharedModel:
    """A local model and its adapters; ``generate`` is serialised (one model, one adapter state)."""

    def __init__(self, model: Any, tokenizer: Any, adapters: Any, base_spec: str, temperature: float, max_new_tokens: int,
                 prompts: Any = None) -> None:  # fmt: skip
        from factory.rollout.hf import HFPolicy

        self.adapters = adapters
        self.base_spec = base_spec
        self.prompts = prompts  # router.loading.AdapterPrompts: each adapter's tools rendered as it was trained on them
        self.engine = HFPolicy(model, tokenizer, base_spec, temperature, max_new_tokens)
        self.lock = threading.RLock()

    def generate(self, choice: Choice, messages: list[dict[str, Any]], tools: list[dict[str, Any]], seed: int, turn: int) -> str:
        with self.lock:
            if self.adapters is not None:
                self.adapters.apply(choice)
            compact = self.prompts.compact_tools(choice) if self.prompts is not None else None
            return self.engine.generate(messages, tools, seed, turn, compact_tools=compact)

    def policy(self, choice: str | None, spec: str) -> "ArmPolicy":
        return ArmPolicy(self, choice, spec)


class ArmPolicy(Policy):
    """One arm on the shared model: the same adapter (or none) for every task."""

    def __init__(self, shared: SharedModel, choice: Choice, spec: str) -> None:
        self.shared = shared
        self.choice = choice
        self.spec = spec

    def start(self, task: Task, tools: list[dict[str, Any]], seed: int) -> Act:
        turn = itertools.count()
        return lambda messages: self.shared.generate(self.choice, messages, tools, seed, next(turn))


class ServedModel:
    """An OpenAI-compatible server: the base model under ``base_name``, adapters under their capability names."""

    def __init__(self, base_url: str, base_name: str, temperature: float, max_tokens: int | None, prompts: Any = None) -> None:
        self.base_url = base_url
        self.base_name = base_name
        self.temperature = temperature
        self.max_tokens = max_tokens or 2048
        self.prompts = prompts  # router.loading.AdapterPrompts, as for SharedModel
        self._policies: dict[str, Policy] = {}

    def served_name(self, choice: Choice) -> str:
        from router.apply_vllm import served_model

        if choice is None or isinstance(choice, str):
            return choice or self.base_name
        return served_model(choice, self.base_name)

    def policy(self, choice: Choice, spec: str | None = None) -> Policy:
        from llm_clients import make_client
        from llm_clients.spec import LLMSpec
        from factory.rollout.policies import LLMPolicy

        name = self.served_name(choice)
        if name not in self._policies:
            client = make_client(LLMSpec(provider="openai-compatible", model=name, base_url=self.base_url), cache=False)
            compact = self.prompts.compact_tools(choice) if self.prompts is not None else False
            self._policies[name] = LLMPolicy(client, spec=spec or f"compat:{name}", temperature=self.temperature, max_tokens=self.max_tokens,
                                             compact_tools=compact)  # fmt: skip
        return self._policies[name]


Decide = Callable[[str, list[dict[str, Any]]], RouteDecision]
"""decide(task_id, messages so far) -> the routing decision (thread-safe: callers serialise)."""


class RoutedPolicy(Policy):
    """Routes each task on the messages it opens with, then plays the chosen arm's policy. Decisions are
    reported through ``on_decision`` as they are made (so an interrupted run keeps them)."""

    def __init__(
        self, decide: Decide, arm_policy: Callable[[RouteDecision], Policy], spec: str,
        on_decision: Callable[[Task, RouteDecision], None] | None = None,
    ) -> None:  # fmt: skip
        self.decide = decide
        self.arm_policy = arm_policy
        self.spec = spec
        self.on_decision = on_decision

    def start(self, task: Task, tools: list[dict[str, Any]], seed: int) -> Act:
        chosen: list[Act] = []

        def act(messages: list[dict[str, Any]]) -> Any:
            if not chosen:
                try:
                    decision = self.decide(task.id, messages)
                except RouterError as exc:  # the routed agent could not act: its error, not the target's
                    raise PolicyError(f"routing failed: {exc}") from None
                if self.on_decision is not None:
                    self.on_decision(task, decision)
                chosen.append(self.arm_policy(decision).start(task, tools, seed))
            return chosen[0](messages)

        return act
