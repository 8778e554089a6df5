"""The update on the real tiny model with a real PEFT adapter: chunked log-probs equal the full softmax
(values and gradients), the base model is the adapter disabled, and a GRPO step moves probability
toward the better trajectory of a group."""

from __future__ import annotations

import pytest
import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM

from trainer.config import GRPOSettings, LoraSettings
from trainer.logprobs import TokenLogProbs
from trainer.model import attach_adapter, trainable_parameters
from trainer.update import Item, PolicyUpdate, pack


@pytest.fixture
def peft_model(tiny_model):
    model = attach_adapter(AutoModelForCausalLM.from_pretrained(tiny_model), LoraSettings(rank=4, alpha=8), seed=0)
    with torch.no_grad():  # a non-zero adapter, so "adapter on" and "adapter off" differ
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)
    return model


def items() -> list[Item]:
    return [Item([11, 42, 97, 5, 300, 12], [0, 0, 1, 1, 0, 1]), Item([8, 9, 10, 600], [0, 1, 1, 1])]


def reference_logprobs(model, batch) -> torch.Tensor:
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float()
    logp = torch.log_softmax(logits, dim=-1)
    return logp[batch["rows"], batch["cols"] - 1, batch["input_ids"][batch["rows"], batch["cols"]]]


def test_chunked_logprobs_equal_full_softmax_with_gradients(peft_model) -> None:
    batch = pack(items(), pad_id=0, device=torch.device("cpu"))
    assert batch["rows"].tolist() == [0, 0, 0, 1, 1, 1] and batch["cols"].tolist() == [2, 3, 5, 1, 2, 3]
    chunked = TokenLogProbs(peft_model, chunk=2)(**batch)
    chunked.sum().backward()
    grads = [p.grad.clone() for p in trainable_parameters(peft_model)]
    peft_model.zero_grad()
    full = reference_logprobs(peft_model, batch)
    full.sum().backward()
    # float32: chunking changes only the order of the log-softmax sums (~84 ulps: rtol 1e-5 / eps32 1.19e-7); the
    # LoRA gradients add those differences over every token and layer, and entries that nearly cancel carry them
    # relatively larger (rtol 1e-3, ~8,400 ulps; atol 1e-5 for entries near 0)
    torch.testing.assert_close(chunked, full, rtol=1e-5, atol=1e-5)
    for mine, theirs in zip(grads, [p.grad for p in trainable_parameters(peft_model)]):
        torch.testing.assert_close(mine, theirs, rtol=1e-3, atol=1e-5)


def test_adapter_off_is_the_frozen_base_model(peft_model, tiny_model) -> None:
    batch = pack(items(), pad_id=0, device=torch.device("cpu"))
    module = TokenLogProbs(peft_model)
    with torch.no_grad():
        on, off = module(**batch), module(**batch, use_adapter=False)
        base = reference_logprobs(AutoModelForCausalLM.from_pretrained(tiny_model), batch)
    torch.testing.assert_close(off, base, rtol=1e-5, atol=1e-5)  # float32, same ops through PEFT's disabled layers: ~84 ulps
    assert (on - off).abs().max() > 1e-3


@pytest.mark.parametrize("steps, kl", [(1, 0.0), (2, 0.1)])
def test_grpo_step_moves_probability_toward_the_better_trajectory(peft_model, steps: int, kl: float) -> None:
    accelerator = Accelerator(cpu=True)
    settings = GRPOSettings(lr=1e-2, micro_batch_size=1, steps_per_iteration=steps, kl_coef=kl)
    module, optimizer = accelerator.prepare(TokenLogProbs(peft_model), torch.optim.AdamW(trainable_parameters(peft_model), lr=settings.lr))
    update = PolicyUpdate(accelerator, module, optimizer, settings, pad_id=0)
    good, bad = items()
    good.advantage, bad.advantage = 1.0, -1.0
    before = [t.sum().item() for t in update.score([good, bad])]
    stats = update.grpo([good, bad], filler=good)
    after = [t.sum().item() for t in update.score([good, bad])]
    assert after[0] > before[0] and after[1] < before[1]
    assert stats.optimizer_steps == steps and stats.trajectories == 2 and stats.tokens == 6
    if kl:
        assert stats.kl > 0
