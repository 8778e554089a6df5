"""Per-token log-probabilities of chosen tokens, without ever holding a [tokens x vocab] tensor.

The decoder runs once over each whole trajectory; the output layer is applied only at the positions that
are trained on, a chunk at a time, and each chunk is recomputed in the backward pass (activation
checkpointing) instead of kept. Peak memory for the output layer is one chunk x vocabulary, in float32,
whatever the episode length - a 49k-vocabulary model over multi-turn episodes of thousands of tokens
needed 17.5 GB for one step without this.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint


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

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        rows: torch.Tensor,
        cols: torch.Tensor,
        use_adapter: bool = True,
    ) -> torch.Tensor:
        base = self.policy.get_base_model()
        context = nullcontext() if use_adapter else self.policy.disable_adapter()
        with context:
            hidden = base.get_decoder()(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
            picked = hidden[rows, cols - 1]
            targets = input_ids[rows, cols]
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
