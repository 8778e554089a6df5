"""Generation engines: one batched generation per turn for all live episodes, the KV cache kept across turns.

A :class:`GenerationSession` holds the live episodes of one rollout batch. Between turns the rollout adds
each episode's env tokens (:meth:`extend`), drops finished ones (:meth:`drop`) and asks for the next
turn of every remaining episode at once (:meth:`generate`). The transformers engine keeps one batched
``DynamicCache`` for the whole session: a turn only encodes the new env tokens, never the conversation
again. Episodes gain different numbers of tokens per turn; each new block is left-padded *within the
block*, and the attention mask (hence position ids, which transformers derives from it) skips the holes,
so every row computes exactly what it would alone.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import torch

from trainer.chat import ChatFormat


class Generated(NamedTuple):
    """One episode's turn: the sampled tokens (with the closing eos when it came) and whether it came."""

    tokens: list[int]
    ended: bool


class GenerationSession(Protocol):
    def extend(self, key: int, tokens: list[int]) -> None: ...

    def drop(self, keys: list[int]) -> None: ...

    def generate(self) -> dict[int, Generated]: ...


class Engine(Protocol):
    """Starts a session over prompts (token ids); ``sync`` makes it sample from the current adapter."""

    def session(self, prompts: dict[int, list[int]]) -> GenerationSession: ...

    def sync(self, model: Any, step: int) -> None: ...


def sampling_config(chat: ChatFormat, temperature: float, max_new_tokens: int) -> Any:
    """Pure ancestral sampling at ``temperature``: no top-k/top-p, whatever the model's own defaults say,
    so the sampled tokens follow the distribution the loss differentiates. Temperature 0 is greedy
    decoding (evaluation)."""
    from transformers import GenerationConfig

    sample = temperature > 0
    return GenerationConfig(
        do_sample=sample, temperature=temperature if sample else None, top_k=None, top_p=None, min_p=None, max_new_tokens=max_new_tokens,
        eos_token_id=chat.eos_id, pad_token_id=chat.pad_id, repetition_penalty=None, return_dict_in_generate=True,
        use_cache=True,
    )


class TransformersEngine:
    """``model.generate`` on the training model itself (CPU or GPU); the adapter is live, nothing to sync."""

    def __init__(self, model: Any, chat: ChatFormat, temperature: float, max_new_tokens: int) -> None:
        self.model = model
        self.chat = chat
        self.config = sampling_config(chat, temperature, max_new_tokens)

    def session(self, prompts: dict[int, list[int]]) -> "TransformersSession":
        return TransformersSession(self, prompts)

    def sync(self, model: Any, step: int) -> None:
        self.model = model


class TransformersSession:
    def __init__(self, engine: TransformersEngine, prompts: dict[int, list[int]]) -> None:
        self.engine = engine
        self.keys: list[int] = list(prompts)
        self.pending: dict[int, list[int]] = {k: list(v) for k, v in prompts.items()}
        self.ids: torch.Tensor | None = None
        self.mask: torch.Tensor | None = None
        self.cache: Any = None

    def extend(self, key: int, tokens: list[int]) -> None:
        self.pending.setdefault(key, []).extend(tokens)

    def drop(self, keys: list[int]) -> None:
        gone = set(keys)
        keep = [i for i, k in enumerate(self.keys) if k not in gone]
        if len(keep) == len(self.keys):
            return
        self.keys = [self.keys[i] for i in keep]
        for key in gone:
            self.pending.pop(key, None)
        if self.ids is None:
            return
        if not keep:
            self.ids = self.mask = self.cache = None
            return
        index = torch.tensor(keep, device=self.ids.device)
        self.ids, self.mask = self.ids[index], self.mask[index]  # type: ignore[index]
        if self.cache is not None:
            self.cache.batch_select_indices(index)

    def _append_pending(self, device: torch.device) -> None:
        width = max((len(self.pending.get(k, [])) for k in self.keys), default=0)
        pad = self.engine.chat.pad_id
        block = torch.full((len(self.keys), width), pad, dtype=torch.long)
        block_mask = torch.zeros((len(self.keys), width), dtype=torch.long)
        for row, key in enumerate(self.keys):
            tokens = self.pending.pop(key, [])
            if tokens:
                block[row, width - len(tokens):] = torch.tensor(tokens, dtype=torch.long)
                block_mask[row, width - len(tokens):] = 1
        block, block_mask = block.to(device), block_mask.to(device)
        if self.ids is None:
            self.ids, self.mask = block, block_mask
        else:
            self.ids = torch.cat([self.ids, block], dim=1)
            self.mask = torch.cat([self.mask, block_mask], dim=1)  # type: ignore[list-item]

    @torch.no_grad()
    def generate(self) -> dict[int, Generated]:
        if not self.keys:
            return {}
        model = self.engine.model
        self._append_pending(next(model.parameters()).device)
        was_training = model.training
        model.eval()
        try:
            out = model.generate(
                input_ids=self.ids, attention_mask=self.mask, past_key_values=self.cache,
                generation_config=self.engine.config,
            )
        finally:
            model.train(was_training)
        assert self.ids is not None and self.mask is not None
        new = out.sequences[:, self.ids.shape[1]:]
        eos = self.engine.chat.eos_id
        new_mask = torch.zeros_like(new)
        results: dict[int, Generated] = {}
        for row, key in enumerate(self.keys):
            tokens = new[row].tolist()
            ended = eos in tokens
            length = tokens.index(eos) + 1 if ended else len(tokens)
            new_mask[row, :length] = 1
            results[key] = Generated(tokens[:length], ended)
        self.ids = out.sequences
        self.mask = torch.cat([self.mask, new_mask], dim=1)
        self.cache = out.past_key_values
        return results
