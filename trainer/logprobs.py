"""Per-token log-probabilities of chosen tokens, without ever holding a [tokens x vocab] tensor.

The decoder runs once over each whole trajectory; the output layer is applied only at the positions that
are trained on, a chunk at a time, and each chunk is recomputed in the backward pass (activation
checkpointing) instead of kept. Peak memory for the output layer is one chunk x vocabulary, in float32,
whatever the episode length - a 49k-vocabulary model over multi-turn episodes of thousands of tokens
needed 17.5 GB for one step without this.

A batch packed with a shared prefix (:func:`trainer.update.pack_shared`) runs each prefix once: its KV
cache, still attached to the graph, is copied to every row that starts with it, and the rows' own tails
attend to it. Gradients from every row flow back into the one prefix computation, so values and gradients
are those of the whole sequences (a test holds them equal). Under gradient checkpointing too: the cache's
layers (:class:`ReplayLayer`) can be run twice, as a checkpointed layer's backward replays it, so the decoder
layers are told to keep it (transformers' ``_can_checkpoint_with_cache``) for the span of the shared pass.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Any, Iterator

import torch
from torch.utils.checkpoint import checkpoint
from transformers.cache_utils import DynamicLayer


class ReplayLayer(DynamicLayer):
    """One layer's KV cache whose ``update`` gives the same answer when run again (a checkpointed layer's
    backward replays its forward). A recording layer (the prefix pass's) stores its keys and values by
    assignment, not by appending; a reading layer (the tails' pass's, given the prefix's keys and values) puts
    them before the tail's own and stores nothing. Two caches, so a prefix layer replayed after the tails'
    pass still records."""

    def __init__(self, keys: torch.Tensor | None = None, values: torch.Tensor | None = None) -> None:
        super().__init__()
        self.reading = keys is not None
        if keys is not None and values is not None:
            self.lazy_initialization(keys, values)
            self.keys, self.values = keys, values

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if self.reading:
            return torch.cat([self.keys, key_states], dim=-2), torch.cat([self.values, value_states], dim=-2)
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.keys, self.values = key_states, value_states
        return key_states, value_states


@contextmanager
def _cache_through_checkpoints(decoder: Any) -> Iterator[None]:
    """Checkpointed decoder layers keep the (replay-safe) cache instead of dropping it, for this span only."""
    layers = [m for m in decoder.modules() if getattr(m, "gradient_checkpointing", False) and hasattr(m, "_can_checkpoint_with_cache")]
    for layer in layers:
        layer._can_checkpoint_with_cache = True
    try:
        yield
    finally:
        for layer in layers:
            del layer._can_checkpoint_with_cache  # back to the class's own value


def _chunk_logprobs(hidden: torch.Tensor, targets: torch.Tensor, head: torch.nn.Module, temperature: float) -> torch.Tensor:
    logits = head(hidden).float()
    if temperature != 1.0:
        logits = logits / temperature
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


class TokenLogProbs(torch.nn.Module):
    """Wraps the PEFT model; this module is what accelerate prepares (DDP/FSDP wrap *it*).

    ``forward(input_ids, attention_mask, rows, cols)`` returns log p(input_ids[r, c] | input_ids[r, :c])
    for every (r, c) pair, at the sampling temperature, so the loss differentiates the distribution the
    rollouts were drawn from. ``use_adapter=False`` gives the frozen base model (for the KL term).
    """

    def __init__(self, policy: Any, chunk: int = 1024, temperature: float = 1.0) -> None:
        super().__init__()
        self.policy = policy
        self.chunk = chunk
        self.temperature = temperature

    def shares_prefix(self) -> bool:
        """Whether a shared-prefix batch can be computed: only with plain per-layer KV caches (full attention
        in every layer); with or without gradient checkpointing."""
        decoder = self.policy.get_base_model().get_decoder()
        layer_types = getattr(decoder.config, "layer_types", None) or ["full_attention"]
        return all(kind == "full_attention" for kind in layer_types)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        rows: torch.Tensor,
        cols: torch.Tensor | None = None,
        use_adapter: bool = True,
        position_ids: torch.Tensor | None = None,
        prefix_ids: torch.Tensor | None = None,
        prefix_mask: torch.Tensor | None = None,
        prefix_of: torch.Tensor | None = None,
        source: torch.Tensor | None = None,
        targets: torch.Tensor | None = None,
    ) -> torch.Tensor:
        base = self.policy.get_base_model()
        context = nullcontext() if use_adapter else self.policy.disable_adapter()
        with context:
            decoder = base.get_decoder()
            if prefix_ids is None:
                assert cols is not None
                hidden = decoder(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
                picked = hidden[rows, cols - 1]
                targets = input_ids[rows, cols]
            else:
                assert prefix_mask is not None and prefix_of is not None and source is not None and targets is not None
                hidden = self._shared_hidden(decoder, input_ids, attention_mask, position_ids, prefix_ids, prefix_mask, prefix_of)
                picked = hidden[source]
            head = base.get_output_embeddings()
            pieces = []
            for start in range(0, picked.shape[0], self.chunk):
                h, t = picked[start: start + self.chunk], targets[start: start + self.chunk]
                if torch.is_grad_enabled():
                    pieces.append(checkpoint(_chunk_logprobs, h, t, head, self.temperature, use_reentrant=False))
                else:
                    pieces.append(_chunk_logprobs(h, t, head, self.temperature))
        if not pieces:
            return hidden.new_zeros(0, dtype=torch.float32)
        return torch.cat(pieces)

    def _shared_hidden(
        self, decoder: Any, suffix_ids: torch.Tensor, suffix_mask: torch.Tensor, positions: torch.Tensor | None,
        prefix_ids: torch.Tensor, prefix_mask: torch.Tensor, prefix_of: torch.Tensor,
    ) -> torch.Tensor:
        """Hidden states of every prefix position, then of every row's tail, flattened into one [C*P + N*S, d]
        table (``source`` indexes it). Prefixes are right-padded; the tails carry explicit positions."""
        from transformers import DynamicCache

        if not self.shares_prefix():
            raise RuntimeError("a shared-prefix batch needs a plain KV cache in every layer; pack it plainly")
        recorded = DynamicCache(config=decoder.config)
        recorded.layers = [ReplayLayer() for _ in recorded.layers]
        with _cache_through_checkpoints(decoder):
            prefix = decoder(input_ids=prefix_ids, attention_mask=prefix_mask, past_key_values=recorded, use_cache=True).last_hidden_state
            cache = DynamicCache(config=decoder.config)  # indexing keeps the graph: each row's gradient reaches its prefix
            cache.layers = [ReplayLayer(layer.keys[prefix_of], layer.values[prefix_of]) for layer in recorded.layers]
            mask = torch.cat([prefix_mask[prefix_of], suffix_mask], dim=1)
            tail = decoder(input_ids=suffix_ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                           use_cache=True).last_hidden_state
        return torch.cat([prefix.reshape(-1, prefix.shape[-1]), tail.reshape(-1, tail.shape[-1])])
