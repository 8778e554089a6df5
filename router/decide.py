"""The routing decision: the frozen base model's next-token logits, restricted to the label tokens.

For each label order scored (one, or every cyclic rotation when debiasing) the label logits are turned into
probabilities with a softmax over the label tokens only; probabilities are averaged per option across
orders, and the option with the highest average wins (ties go to the earlier option in menu order).
With ``soft`` the winning capability's adapter is mixed with the next most probable ones (nucleus over
the capabilities' probabilities, as in the paper's composition rule); a "no adapter" win is never mixed.

    router = Router(model, tokenizer, menu, RouterConfig(debias="cyclic"))
    decision = router.route(trajectory)        # or messages, or plain text
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

from router.frozen import frozen_base
from router.observation import Observation, first_observation, fingerprint
from router.prompt import PromptBuilder, RoutingPrompt
from router.schema import NO_ADAPTER, OrderScore, RouteDecision, RouterConfig, RoutingMenu

Progress = Callable[[int, int], None]


def cyclic_orders(keys: Sequence[str], count: int | None = None) -> list[list[str]]:
    """Rotations of ``keys``: with all n of them every option takes every label and position exactly once
    (a Latin square), so a preference for a label or a position adds the same to every option."""
    n = len(keys)
    count = n if count is None else max(1, min(count, n))
    shifts = sorted({(i * n) // count for i in range(count)})
    return [list(keys[s:]) + list(keys[:s]) for s in shifts]


def nucleus_weights(
    probabilities: dict[str, float], capabilities: Sequence[str], top_p: float, max_adapters: int | None = None
) -> dict[str, float]:
    """Paper's composition weights: alpha_c proportional to p(c) over capabilities, keep the smallest
    most-probable set whose share reaches ``top_p`` (at most ``max_adapters``), renormalise."""
    ranked = sorted(capabilities, key=lambda c: -probabilities[c])  # stable: ties keep menu order
    total = sum(probabilities[c] for c in ranked)
    if total <= 0.0:
        return {ranked[0]: 1.0}
    kept: list[str] = []
    share = 0.0
    for capability in ranked:
        kept.append(capability)
        share += probabilities[capability] / total
        if share >= top_p - 1e-12 or (max_adapters is not None and len(kept) >= max_adapters):
            break
    mass = sum(probabilities[c] for c in kept)
    return {c: probabilities[c] / mass for c in kept}


def _croppable(cache: Any) -> bool:
    """Plain per-layer caches can be cut back to the menu after each task; anything else is copied."""
    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer).__name__ == "DynamicLayer" for layer in layers)


class Router:
    """Routes tasks to adapters with the frozen base model. Not thread-safe: one router per thread."""

    def __init__(self, model: Any, tokenizer: Any, menu: RoutingMenu, config: RouterConfig | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.menu = menu
        self.config = config or RouterConfig()
        self.builder = PromptBuilder(tokenizer, menu, self.config)
        self._prefix_kv: dict[tuple[str, ...], Any] = {}
        self._decided: dict[str, RouteDecision] = {}

    @property
    def labels(self) -> list[str]:
        return self.builder.labels

    def orders(self) -> list[list[str]]:
        keys = self.menu.keys
        return [keys] if self.config.debias == "none" else cyclic_orders(keys, self.config.orders)

    # -- scoring --------------------------------------------------------------------------------
    def _device(self) -> Any:
        return next(self.model.parameters()).device

    def next_token_logits(self, prompt: RoutingPrompt) -> Any:
        """Logits over the whole vocabulary for the token after ``prompt`` (call inside ``frozen_base``)."""
        import torch

        ids = torch.tensor([prompt.ids], device=self._device())
        cut = prompt.prefix_len
        if not self.config.prefix_cache or cut <= 0 or cut >= ids.shape[1]:
            return self.model(input_ids=ids, use_cache=False, logits_to_keep=1).logits[0, -1]
        key = tuple(prompt.keys)
        cache = self._prefix_kv.get(key)
        if cache is None:
            cache = self.model(input_ids=ids[:, :cut], use_cache=True, logits_to_keep=1).past_key_values
            self._prefix_kv[key] = cache
        if not _croppable(cache):  # e.g. sliding-window layers: work on a copy, keep the menu's cache intact
            cache = copy.deepcopy(cache)
        try:
            out = self.model(input_ids=ids[:, cut:], past_key_values=cache, use_cache=True, logits_to_keep=1)
        finally:
            extra = cache.get_seq_length() - cut
            if extra > 0:
                cache.crop(-extra)  # drop this task's entries; the menu's stay for the next task
        return out.logits[0, -1]

    def score(self, prompt: RoutingPrompt) -> dict[str, float]:
        """Probability per option key: softmax over the label tokens' logits (call inside ``frozen_base``)."""
        import torch

        logits = self.next_token_logits(prompt)
        index = torch.tensor([self.builder.token_of[label] for label in prompt.labels], device=logits.device)
        probs = torch.softmax(logits.index_select(0, index).double(), dim=0).tolist()
        return dict(zip(prompt.keys, probs))

    # -- deciding -------------------------------------------------------------------------------
    def route(self, observation: Observation, task_id: str | None = None) -> RouteDecision:
        """Decide for one task (its first observation is taken from whatever form it comes in)."""
        started = time.perf_counter()
        messages = first_observation(observation, include_system=self.config.include_system)
        key = fingerprint(messages)
        known = self._decided.get(key)
        if known is not None:  # the same observation (e.g. another trial of a task) gets the same answer
            return known.model_copy(update={"task_id": task_id, "seconds": 0.0})
        scores: list[OrderScore] = []
        prompt_tokens = 0
        with frozen_base(self.model):
            for order in self.orders():
                prompt = self.builder.build(order, messages)
                prompt_tokens = prompt_tokens or len(prompt.ids)
                scores.append(OrderScore(order=prompt.keys, labels=prompt.labels, probabilities=self.score(prompt)))
        decision = self._decide(scores, task_id, prompt_tokens, time.perf_counter() - started)
        self._decided[key] = decision
        return decision

    def _decide(self, scores: list[OrderScore], task_id: str | None, prompt_tokens: int, seconds: float) -> RouteDecision:
        keys = self.menu.keys
        averaged = {k: sum(s.probabilities[k] for s in scores) / len(scores) for k in keys}
        best = max(range(len(keys)), key=lambda i: (averaged[keys[i]], -i))
        winner = keys[best]
        choice = None if winner == NO_ADAPTER else winner
        if choice is None:
            weights: dict[str, float] = {}
        elif self.config.soft:
            weights = nucleus_weights(averaged, self.menu.capabilities, self.config.top_p, self.config.max_adapters)
        else:
            weights = {choice: 1.0}
        return RouteDecision(
            task_id=task_id,
            choice=choice,
            label=self.labels[best],
            probabilities=averaged,
            weights=weights,
            mode="soft" if self.config.soft else "hard",
            debiased=len(scores) > 1,
            orders=scores,
            prompt_tokens=prompt_tokens,
            seconds=round(seconds, 6),
        )

    def route_many(
        self, tasks: Sequence[tuple[str | None, Observation]], progress: Progress | None = None
    ) -> list[RouteDecision]:
        """Decide for several tasks, in order; ``progress(done, total)`` after each."""
        out = []
        for done, (task_id, observation) in enumerate(tasks, start=1):
            out.append(self.route(observation, task_id=task_id))
            if progress:
                progress(done, len(tasks))
        return out

    def clear_cache(self) -> None:
        """Forget the menu's key/value caches and remembered decisions (e.g. after changing base weights)."""
        self._prefix_kv.clear()
        self._decided.clear()
