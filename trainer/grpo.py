"""The GRPO objective as pure tensor functions, so each piece can be pinned on hand-computed numbers.

* advantages: within a group of K rollouts from one seed, ``(r - mean) / (std + eps)``; a group whose
  rewards are all equal carries no signal and is dropped (and counted);
* the surrogate: per token, ``-min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)``;
* aggregation (``loss_type``): ``grpo`` averages a trajectory's token losses, then trajectories over the
  batch; ``dapo`` sums them (the caller divides by the step's trained tokens, as TRL's ``dapo``), so every
  token weighs the same however long its episode;
* optional KL to the frozen base: the k3 estimator ``exp(ref - logp) - (ref - logp) - 1`` per token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def group_advantages(rewards: torch.Tensor, eps: float = 1e-4, tol: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """``rewards`` [G, K] -> (advantages [G, K], informative [G] bool). Std is the sample std (K - 1),
    as in DeepSeekMath and TRL; groups with std <= ``tol`` get advantage 0 and ``informative`` False."""
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError("rewards must be [groups, K] with K >= 2")
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True, unbiased=True)
    informative = std.squeeze(1) > tol
    advantages = (rewards - mean) / (std + eps)
    return torch.where(informative.unsqueeze(1), advantages, torch.zeros_like(advantages)), informative


def clipped_token_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token clipped surrogate loss and where clipping took the gradient away (the 'clip fraction').

    All inputs have one entry per trained token; ``advantages`` is the trajectory's advantage repeated.
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    loss = -torch.minimum(unclipped, clipped)
    was_clipped = ((ratio < 1.0 - eps_low) & (advantages < 0)) | ((ratio > 1.0 + eps_high) & (advantages > 0))
    return loss, was_clipped


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's unbiased, non-negative estimator of KL(policy || reference), per token."""
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1.0


def per_trajectory_sum(values: torch.Tensor, owner: torch.Tensor, n_trajectories: int) -> torch.Tensor:
    """Sum of ``values`` over the tokens of each trajectory (``owner`` gives each token's trajectory)."""
    return torch.zeros(n_trajectories, dtype=values.dtype, device=values.device).index_add(0, owner, values)


def per_trajectory_mean(values: torch.Tensor, owner: torch.Tensor, n_trajectories: int) -> torch.Tensor:
    """Mean of ``values`` over the tokens of each trajectory (``owner`` gives each token's trajectory)."""
    sums = per_trajectory_sum(values, owner, n_trajectories)
    counts = torch.zeros(n_trajectories, dtype=values.dtype, device=values.device).index_add(
        0, owner, torch.ones_like(values)
    )
    return sums / counts.clamp(min=1.0)


@dataclass
class LossParts:
    """A micro-batch's loss (``loss``, to backpropagate), per-trajectory losses and detached statistics."""

    loss: torch.Tensor
    trajectory_losses: torch.Tensor
    clipped_tokens: int
    tokens: int
    kl_sum: float


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    owner: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float,
    eps_high: float,
    kl_coef: float = 0.0,
    ref_logp: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
    token_sum: bool = False,
) -> LossParts:
    """The objective for a batch of trajectories.

    ``logp``/``old_logp``/``ref_logp`` [N tokens], ``owner`` [N] (each token's trajectory), ``advantages``
    [n trajectories]. Token losses are averaged per trajectory, then over trajectories: a plain mean, or
    ``sum(weights * per-trajectory loss)`` when ``weights`` say how a micro-batch shares a larger batch.
    """
    n = advantages.shape[0]
    token_loss, was_clipped = clipped_token_loss(logp, old_logp, advantages[owner], eps_low, eps_high)
    kl_sum = 0.0
    if kl_coef > 0 and ref_logp is not None:
        kl = kl_k3(logp, ref_logp)
        token_loss = token_loss + kl_coef * kl
        kl_sum = float(per_trajectory_mean(kl.detach(), owner, n).sum())
    trajectory = (per_trajectory_sum if token_sum else per_trajectory_mean)(token_loss, owner, n)
    loss = trajectory.mean() if weights is None else (trajectory * weights).sum()
    return LossParts(
        loss=loss,
        trajectory_losses=trajectory,
        clipped_tokens=int(was_clipped.sum()),
        tokens=int(logp.numel()),
        kl_sum=kl_sum,
    )
