"""Generation engines: one batched generation per turn for all live episodes, the KV cache kept across turns.

A :class:`GenerationSession` holds the live episodes of one rollout batch. Between turns the rollout adds
each episode's env tokens (:meth:`extend`), drops finished ones (:meth:`drop`) and asks for the next
turn of every remaining episode at once (:meth:`generate`). The transformers engine keeps one batched
``DynamicCache`` for the whole session: a turn only encodes the new env tokens, never the conversation
again. Episodes gain different numbers of tokens per turn; each new block is left-padded *within the
block*, and the attention mask (hence position ids, which transformers derives from it) skips the holes,
so every row computes exactly what it would alone.

The prompt is prefilled once per shared prefix: the rollouts of a group (and groups whose prompts share the
system text) have their common token prefix, found from the tokens (:mod:`trainer.prefix`), run through
the model once; its KV cache is copied to every member's row and only each member's own tail is encoded.
A turn ends at the eos token, at any other end-of-turn token the model declares, or at ``</tool_call>``
(the env runs one call per turn), instead of running on to ``max_new_tokens``.

``merge_adapter`` generates with the LoRA update folded into the base weights (:func:`merged_adapter`): one
matmul per linear layer per token instead of three, which on CPU is most of a small model's decoding time.
The original weight tensors are put back afterwards (not subtracted: no drift), so it costs one copy of the
adapted weights while generating; the sampled distribution is the same up to float rounding.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Any, Iterator, NamedTuple, Protocol

import torch

from trainer.chat import ChatFormat
from trainer.prefix import owners, shared_prefixes, worth_sharing

TOOL_CALL_END = "</tool_call>"
"""A Hermes/Qwen tool call is complete here; the env acts on one call per turn."""


class Generated(NamedTuple):
    """One episode's turn: the sampled tokens (with the closing eos when it came), whether the eos came, and
    whether a stop sequence (another end-of-turn token, ``</tool_call>``) ended the turn before it; a turn
    with neither was cut at ``max_new_tokens``. After a stop the eos is the env's (masked) text."""

    tokens: list[int]
    ended: bool
    stopped: bool = False


class GenerationSession(Protocol):
    def extend(self, key: int, tokens: list[int]) -> None: ...

    def drop(self, keys: list[int]) -> None: ...

    def generate(self) -> dict[int, Generated]: ...


class Engine(Protocol):
    """Starts a session over prompts (token ids); ``sync`` makes it sample from the current adapter."""

    def session(self, prompts: dict[int, list[int]]) -> GenerationSession: ...

    def sync(self, model: Any, step: int) -> None: ...


class StopRule(NamedTuple):
    """Where a turn ends: token ids (the eos first) and strings that are not single tokens."""

    token_ids: list[int]
    strings: list[str]


def stop_rule(chat: ChatFormat, declared_eos: Any = None, stop_at_tool_call: bool = True) -> StopRule:
    """The eos, the model's own end-of-turn ids (``generation_config.eos_token_id``: an int or a list) and
    ``</tool_call>``: as a token id where the tokenizer has it as one token (Qwen's do), else as a string."""
    ids = [chat.eos_id]
    for extra in [declared_eos] if isinstance(declared_eos, int) else list(declared_eos or []):
        if int(extra) not in ids:
            ids.append(int(extra))
    strings = []
    if stop_at_tool_call:
        encoded = chat.encode(TOOL_CALL_END)
        if len(encoded) == 1:
            ids.append(encoded[0])
        else:
            strings.append(TOOL_CALL_END)
    return StopRule(ids, strings)


def declared_eos(model: Any) -> Any:
    """``generation_config.eos_token_id`` of a transformers model (None when it has none)."""
    return getattr(getattr(model, "generation_config", None), "eos_token_id", None)


def sampling_config(chat: ChatFormat, temperature: float, max_new_tokens: int, stops: StopRule | None = None) -> Any:
    """Pure ancestral sampling at ``temperature``: no top-k/top-p, whatever the model's own defaults say,
    so the sampled tokens follow the distribution the loss differentiates. Temperature 0 is greedy
    decoding (evaluation). ``stops`` (default: the eos alone) says where a turn ends."""
    from transformers import GenerationConfig

    sample = temperature > 0
    return GenerationConfig(
        do_sample=sample, temperature=temperature if sample else None, top_k=None, top_p=None, min_p=None,
        max_new_tokens=max_new_tokens, eos_token_id=stops.token_ids if stops else chat.eos_id, pad_token_id=chat.pad_id,
        repetition_penalty=None, return_dict_in_generate=True, use_cache=True,
        stop_strings=(stops.strings or None) if stops else None,
    )


def turn_length(tokens: list[int], stops: StopRule, decode: Any) -> tuple[int, bool, bool]:
    """(tokens the turn keeps, ended by the eos, ended by another stop). The first stop token wins; a
    stop string ends the turn at the first token whose text completes it (binary search: "the text so far
    contains it" only turns true as tokens are added)."""
    end = next((i + 1 for i, t in enumerate(tokens) if t in stops.token_ids), len(tokens))
    if stops.strings:
        def contains(n: int) -> bool:
            text = decode(tokens[:n])
            return any(s in text for s in stops.strings)

        if contains(end):
            low, high = 1, end
            while low < high:
                middle = (low + high) // 2
                low, high = (low, middle) if contains(middle) else (middle + 1, high)
            if low < end or tokens[end - 1] not in stops.token_ids:
                return low, False, True
    if end and tokens[end - 1] in stops.token_ids:
        return end, tokens[end - 1] == stops.token_ids[0], tokens[end - 1] != stops.token_ids[0]
    return end, False, False


@contextmanager
def merged_adapter(model: Any) -> Iterator[int]:
    """For the span, every active LoRA linear layer computes with ``base + delta`` in one weight and skips its
    side path (PEFT's ``merged`` state); the base layers' original tensors are restored exactly after. Yields
    the number of layers merged (0 for a model without an adapter, or with it disabled)."""
    from peft.tuners.lora.layer import Linear as LoraLinear

    swapped = []
    try:
        with torch.no_grad():
            for module in model.modules():
                if not isinstance(module, LoraLinear) or module.merged or module.disable_adapters:
                    continue
                adapters = [a for a in module.active_adapters if a in module.lora_A]
                if not adapters:
                    continue
                base = module.get_base_layer()
                original = base.weight.data
                merged = original.clone()
                for adapter in adapters:
                    merged += module.get_delta_weight(adapter).to(merged.dtype)
                base.weight.data = merged
                module.merged_adapters = adapters
                swapped.append((module, base, original))
        yield len(swapped)
    finally:
        for module, base, original in swapped:
            base.weight.data = original
            module.merged_adapters = []


class TransformersEngine:
    """``model.generate`` on the training model itself (CPU or GPU); the adapter is live, nothing to sync.

    ``share_prefix`` prefills each shared prompt prefix once; ``stops`` says where a turn ends (default:
    :func:`stop_rule`). ``share_prefix=False, stops=StopRule([eos], [])`` is the engine as it was before
    either existed (benchmarks compare the two). ``merge_adapter``: generate with the adapter folded in
    (:func:`merged_adapter`).
    """

    def __init__(self, model: Any, chat: ChatFormat, temperature: float, max_new_tokens: int,
                 share_prefix: bool = True, stops: StopRule | None = None, merge_adapter: bool = False) -> None:
        self.model = model
        self.chat = chat
        self.share_prefix = share_prefix
        self.merge_adapter = merge_adapter
        self.stops = stops or stop_rule(chat, declared_eos(model))
        self.config = sampling_config(chat, temperature, max_new_tokens, self.stops)

    def session(self, prompts: dict[int, list[int]]) -> "TransformersSession":
        return TransformersSession(self, prompts)

    def sync(self, model: Any, step: int) -> None:
        self.model = model


def _decoder(model: Any) -> Any:
    """The transformer stack without the output layer (a PEFT model's LoRA layers are inside it)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_decoder()


def prefill_shared(model: Any, prompts: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, Any, list[int]] | None:
    """Run each shared prefix of ``prompts`` once and copy its KV cache to every member's row.

    Returns (ids [N, P], attention mask [N, P], the cache, each row's prefix length): rows hold their
    prefix right-padded to the longest, so the tails the caller appends continue at the right positions
    (transformers derives them from the mask). None when no two prompts share a prefix worth it, or when
    the model's cache is not a plain per-layer KV cache (sliding windows), where copying rows is not exact.
    """
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    clusters = shared_prefixes(prompts, keep=1)
    if not worth_sharing(clusters):
        return None
    device = next(model.parameters()).device
    width = max(c.length for c in clusters)
    ids = torch.full((len(clusters), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(clusters), width), dtype=torch.long)
    for row, cluster in enumerate(clusters):
        ids[row, : cluster.length] = torch.tensor(prompts[cluster.members[0]][: cluster.length], dtype=torch.long)
        mask[row, : cluster.length] = 1
    ids, mask = ids.to(device), mask.to(device)
    decoder = _decoder(model)
    cache = DynamicCache(config=decoder.config)
    if any(type(layer) is not DynamicLayer for layer in cache.layers):
        return None
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    decoder(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True)
    owner = owners(clusters, len(prompts))
    cache.batch_select_indices(torch.tensor(owner, device=device))
    return ids[owner], mask[owner], cache, [clusters[c].length for c in owner]


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

    def _prefill(self) -> None:
        """First turn: the shared prefixes once; each row keeps only its own tail pending."""
        prompts = [self.pending.get(k, []) for k in self.keys]
        if min(map(len, prompts), default=0) < 2:
            return
        shared = prefill_shared(self.engine.model, prompts, self.engine.chat.pad_id)
        if shared is None:
            return
        self.ids, self.mask, self.cache, lengths = shared
        for key, length in zip(self.keys, lengths):
            self.pending[key] = self.pending[key][length:]

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
        engine = self.engine
        model = engine.model
        was_training = model.training
        model.eval()
        try:
            with merged_adapter(model) if engine.merge_adapter else nullcontext():
                if self.ids is None and engine.share_prefix:
                    self._prefill()
                self._append_pending(next(model.parameters()).device)
                out = model.generate(
                    input_ids=self.ids, attention_mask=self.mask, past_key_values=self.cache,
                    generation_config=engine.config, tokenizer=engine.chat.tokenizer if engine.stops.strings else None,
                )
        finally:
            model.train(was_training)
        assert self.ids is not None and self.mask is not None
        new = out.sequences[:, self.ids.shape[1]:]
        new_mask = torch.zeros_like(new)
        results: dict[int, Generated] = {}
        decode = engine.chat.tokenizer.decode
        for row, key in enumerate(self.keys):
            tokens = new[row].tolist()
            length, ended, stopped = turn_length(tokens, engine.stops, decode)
            new_mask[row, :length] = 1
            results[key] = Generated(tokens[:length], ended, stopped)
        self.ids = out.sequences
        self.mask = torch.cat([self.mask, new_mask], dim=1)
        self.cache = out.past_key_values
        return results
