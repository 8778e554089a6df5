"""Shared-prefix scoring under gradient checkpointing (issue 35): the checkpointed layers keep the prefix's
KV cache (its layers replay safely), so the update shares prompts AND recomputes activations, and its
log-probs and gradients are those of the whole sequences without checkpointing, within float32 rounding."""

from __future__ import annotations

import copy

import pytest
import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM

from tests.trainer.test_training_cost import CPU, items_with_shared_prompts
from trainer.config import GRPOSettings, LoraSettings
from trainer.logprobs import TokenLogProbs
from trainer.model import attach_adapter, trainable_parameters
from trainer.update import PolicyUpdate, pack, pack_shared

EPS = torch.finfo(torch.float32).eps
LOGP_TOL = 100 * EPS   # ~1.2e-5: a log-prob is a sum over a few hundred float32 terms summed in another order
GRAD_TOL = 1000 * EPS  # ~1.2e-4: a gradient entry adds one such difference per trained token


@pytest.fixture
def model(tiny_model):
    model = attach_adapter(AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32), LoraSettings(rank=4, alpha=8), seed=0)
    with torch.no_grad():  # a non-zero adapter, so its effect on the prefix is part of what is compared
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)
    return model


def attention_calls(model) -> list[int]:
    """A counter of attention forwards (inside the checkpointed layer: a replay counts again)."""
    calls = [0]
    for name, module in model.named_modules():
        if name.endswith("self_attn"):
            module.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


def scored(model, batch) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad()
    logp = TokenLogProbs(model, chunk=7)(**batch)
    (logp * torch.linspace(0.5, 1.5, logp.numel())).sum().backward()  # every token's gradient weighs differently
    return logp.detach(), [p.grad.clone() for p in trainable_parameters(model)]


def test_shared_prefix_with_checkpointing_equals_the_plain_whole_sequences(model) -> None:
    items = items_with_shared_prompts()
    plain_model, checkpointed = model, copy.deepcopy(model)
    plain_model.train()
    logp_plain, grads_plain = scored(plain_model, pack(items, 0, CPU))

    checkpointed.get_base_model().gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    checkpointed.train()
    assert TokenLogProbs(checkpointed).shares_prefix()
    calls = attention_calls(checkpointed)
    shared = pack_shared(items, 0, CPU)
    assert shared is not None
    logp_shared, grads_shared = scored(checkpointed, shared)
    layers = checkpointed.get_base_model().config.num_hidden_layers
    assert calls[0] == 2 * 2 * layers  # two passes (prefix, tails), each layer run again in the backward: checkpointed

    torch.testing.assert_close(logp_shared, logp_plain, rtol=LOGP_TOL, atol=LOGP_TOL)
    for mine, whole in zip(grads_shared, grads_plain):
        torch.testing.assert_close(mine, whole, rtol=GRAD_TOL, atol=GRAD_TOL / 10)
    assert max(g.abs().max().item() for g in grads_plain) > 1e-2  # the comparison is not between zeros
    # the layers are back to dropping a cache outside the shared pass
    assert not any(getattr(m, "_can_checkpoint_with_cache", False) for m in checkpointed.modules())


def test_the_update_shares_prefixes_under_checkpointing_with_the_plain_loss(model) -> None:
    """PolicyUpdate packs shared prefixes with checkpointing on, and its GRPO loss and gradient norm are
    those of the plain, un-checkpointed update."""
    settings = GRPOSettings(lr=1.0, micro_batch_size=4)
    outcomes = []
    for checkpointing in (False, True):
        policy = copy.deepcopy(model)
        if checkpointing:
            policy.get_base_model().gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        policy.train()
        accelerator = Accelerator(cpu=True)
        module, optimizer = accelerator.prepare(TokenLogProbs(policy), torch.optim.SGD(trainable_parameters(policy), lr=settings.lr))
        update = PolicyUpdate(accelerator, module, optimizer, settings, pad_id=0, share_prefix=checkpointing)
        items = items_with_shared_prompts()
        for item, advantage in zip(items, [1.0, -0.5, 0.7, -1.2, 0.3, 0.8, -0.8, -0.3]):
            item.advantage = advantage
        assert ("prefix_ids" in update.pack(items[:3])) == checkpointing
        outcomes.append(update.grpo(items, filler=items[0]))
    plain, shared = outcomes
    assert shared.tokens == plain.tokens
    assert shared.loss == pytest.approx(plain.loss, rel=LOGP_TOL * 10, abs=LOGP_TOL)
    assert shared.grad_norms == pytest.approx(plain.grad_norms, rel=GRAD_TOL)
