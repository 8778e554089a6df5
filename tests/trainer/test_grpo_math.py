"""The GRPO objective pinned on hand-computed numbers: advantages, the zero-variance drop, the clipped
per-token loss and its gradient, per-trajectory-then-batch averaging, the KL estimator."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.config import GRPOSettings
from trainer.grpo import clipped_token_loss, group_advantages, grpo_loss, kl_k3, per_trajectory_mean
from trainer.rollout import Rollout
from trainer.update import build_items


def test_group_advantages_by_hand() -> None:
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5], [1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    advantages, informative = group_advantages(rewards, eps=1e-4)
    # group 0: mean 0.5, sample std sqrt(4 * 0.25 / 3) = 0.57735
    a = 0.5 / (math.sqrt(1 / 3) + 1e-4)
    assert advantages[0].tolist() == pytest.approx([a, -a, -a, a], abs=1e-9)
    # group 1: every reward equal -> no signal, advantage 0, flagged
    assert advantages[1].tolist() == [0.0, 0.0, 0.0, 0.0]
    # group 2: mean 0.25, sample std sqrt((0.5625 + 3 * 0.0625) / 3) = 0.5
    assert advantages[2].tolist() == pytest.approx([0.75 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001], abs=1e-9)
    assert informative.tolist() == [True, False, True]


def rollout(group: int, reward: float, *, termination: str = "agent_stop", error: str | None = None) -> Rollout:
    return Rollout(group=group, member=0, seed=group, prompt_ids=[5, 6], completion_ids=[7, 8, 9], completion_mask=[1, 0, 1],
                   reward=reward, termination=termination, error=error)


def test_zero_variance_groups_are_dropped_and_counted() -> None:
    rollouts = [
        rollout(0, 1.0), rollout(0, 0.0),                                   # informative
        rollout(1, 0.3), rollout(1, 0.3), rollout(1, 0.3),                  # all equal: dropped
        rollout(2, 1.0), rollout(2, 0.0, termination="context_limit"),      # one valid member left: dropped
        rollout(3, 1.0), rollout(3, 1.0), rollout(3, 0.0, termination="infrastructure_error", error="WorkerCrashed"),
    ]
    items, groups, flat = build_items(rollouts, GRPOSettings())
    assert (groups, flat) == (4, 3)
    assert [round(i.advantage, 4) for i in items] == [round(1 / (math.sqrt(0.5) + 1e-4) * 0.5, 4), round(-0.5 / (math.sqrt(0.5) + 1e-4), 4)]
    # the trained sequence is prompt + completion up to the last generated token, generated tokens masked in
    assert items[0].ids == [5, 6, 7, 8, 9] and items[0].mask == [0, 0, 1, 0, 1]


def test_clipped_token_loss_by_hand() -> None:
    ratios = torch.tensor([1.5, 0.5, 1.1, 0.7, 0.5])
    advantages = torch.tensor([1.0, -1.0, 1.0, 1.0, 1.0])
    logp = torch.log(ratios).requires_grad_(True)
    loss, clipped = clipped_token_loss(logp, torch.zeros(5), advantages, eps_low=0.2, eps_high=0.28)
    # 1.5*1 vs clip 1.28*1 -> -1.28 (clipped); 0.5*-1 vs 0.8*-1 -> min is -0.8 -> 0.8 (clipped);
    # 1.1 inside the band; 0.7 and 0.5 with A > 0: the unclipped term is the smaller, so it is kept (not clipped)
    assert loss.tolist() == pytest.approx([-1.28, 0.8, -1.1, -0.7, -0.5])
    assert clipped.tolist() == [True, True, False, False, False]
    loss.sum().backward()
    # clipped tokens pass no gradient; the others pass -A * ratio (d ratio / d logp = ratio)
    assert logp.grad.tolist() == pytest.approx([0.0, 0.0, -1.1, -0.7, -0.5])


def test_loss_averages_per_trajectory_then_over_the_batch() -> None:
    # trajectory 0 has one token, trajectory 1 three; ratio 1 everywhere, so token loss = -A
    owner = torch.tensor([0, 1, 1, 1])
    logp = torch.zeros(4, requires_grad=True)
    parts = grpo_loss(logp, torch.zeros(4), owner, torch.tensor([2.0, -1.0]), 0.2, 0.2)
    # per trajectory: -2 and +1; batch mean (-2 + 1) / 2 = -0.5 (a token mean would give (-2 + 3) / 4 = 0.25)
    assert parts.trajectory_losses.tolist() == pytest.approx([-2.0, 1.0])
    assert float(parts.loss) == pytest.approx(-0.5)
    parts.loss.backward()
    # each trajectory's tokens share its weight: 1/2 for the lone token, 1/6 for each of the three
    assert logp.grad.tolist() == pytest.approx([-2.0 / 2, 1.0 / 6, 1.0 / 6, 1.0 / 6])
    weighted = grpo_loss(logp.detach(), torch.zeros(4), owner, torch.tensor([2.0, -1.0]), 0.2, 0.2, weights=torch.tensor([0.25, 0.0]))
    assert float(weighted.loss) == pytest.approx(-0.5)


def test_kl_term_by_hand() -> None:
    logp, ref = torch.tensor([-1.0, -2.0]), torch.tensor([-2.0, -2.0])
    assert kl_k3(logp, ref).tolist() == pytest.approx([math.exp(-1) + 1 - 1, 0.0])
    parts = grpo_loss(logp, logp, torch.tensor([0, 0]), torch.tensor([0.0]), 0.2, 0.2, kl_coef=0.5, ref_logp=ref)
    assert float(parts.loss) == pytest.approx(0.5 * math.exp(-1) / 2)
    assert parts.kl_sum == pytest.approx(math.exp(-1) / 2)


def test_per_trajectory_mean_ignores_empty_trajectories() -> None:
    values = torch.tensor([1.0, 3.0, 5.0])
    assert per_trajectory_mean(values, torch.tensor([0, 0, 2]), 3).tolist() == [2.0, 0.0, 5.0]


def test_dapo_cancels_tokens_that_success_and_failure_share_whatever_their_lengths() -> None:
    """A success and a failure (advantages +1, -1) start with the same token (one parameter). Under ``grpo`` a
    token weighs 1 / its trajectory's length, so that token is pushed up when the success is the shorter (3
    tokens against 9) and down when the failure is: with long successful episodes and short failures, GRPO's
    mean pushes down the first step they share. Summed per token (``dapo``) it is left alone either way: the
    group's advantages sum to zero."""
    for success_len, failure_len in ((3, 9), (9, 3)):
        for token_sum, expect_zero in ((False, False), (True, True)):
            shared = torch.zeros((), requires_grad=True)
            tails = [torch.zeros(n - 1) for n in (success_len, failure_len)]
            logp = torch.cat([shared.view(1), tails[0], shared.view(1), tails[1]])
            owner = torch.tensor([0] * success_len + [1] * failure_len)
            parts = grpo_loss(logp, logp.detach(), owner, torch.tensor([1.0, -1.0]), 0.2, 0.2, token_sum=token_sum)
            parts.loss.backward()
            if expect_zero:
                assert shared.grad == pytest.approx(0.0, abs=1e-7)
            else:
                push = -float(shared.grad)  # > 0: the shared token's probability goes up
                assert push == pytest.approx((1 / success_len - 1 / failure_len) / 2, rel=1e-5)
                assert (push > 0) == (success_len < failure_len)
