"""Train mode is set explicitly for every update and restored after it; with it, gradient checkpointing
really reduces activation memory (measured as the bytes autograd saves for the backward pass)."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch

from trainer.config import LoraSettings
from trainer.logprobs import TokenLogProbs
from trainer.model import attach_adapter, mode


def saved_bytes(module: TokenLogProbs, batch: dict[str, torch.Tensor], context) -> int:
    """Bytes of the tensors autograd keeps for backward during one forward pass."""
    total = [0]

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        total[0] += tensor.numel() * tensor.element_size()
        return tensor

    with context, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(**batch).sum().backward()
    return total[0]


def test_gradient_checkpointing_cuts_activation_memory_only_in_train_mode(tiny_model) -> None:
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    policy = attach_adapter(base, LoraSettings(rank=4))
    policy.eval()  # as loading, and every generation, leave it
    module = TokenLogProbs(policy, chunk=64)
    ids = torch.randint(5, base.config.vocab_size, (2, 256))
    cols = torch.arange(1, 256).repeat(2)
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "rows": torch.arange(2).repeat_interleave(255), "cols": cols}

    plain = saved_bytes(module, batch, mode(policy, True))
    base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    policy.enable_input_require_grads()
    in_eval = saved_bytes(module, batch, nullcontext())
    in_train = saved_bytes(module, batch, mode(policy, True))
    assert not policy.training  # restored
    assert in_eval == pytest.approx(plain, rel=0.05)  # in eval mode checkpointing silently does nothing
    assert in_train < 0.5 * plain, (in_train, plain)


def test_every_update_runs_in_train_mode_and_generation_in_eval_mode(tmp_path, wifi_env, tiny_model, monkeypatch) -> None:
    from trainer.config import load_config
    from trainer.loop import GRPORun
    from trainer.update import PolicyUpdate

    seen: dict[str, list[bool]] = {"grpo": [], "supervised": []}
    for name in seen:
        original = getattr(PolicyUpdate, name)

        def spy(self, *args, _original=original, _name=name, **kwargs):
            seen[_name].append(self.accelerator.unwrap_model(self.module).policy.training)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(PolicyUpdate, name, spy)
    settings = ["threads=1", "sandbox='bwrap'", "grpo.groups=1", "grpo.group_size=2", "rollout.max_new_tokens=8",
                "rollout.max_seq_len=1024", "warm_start.steps=1", "heldout.seeds=2", "grpo.gradient_checkpointing=true"]
    run = GRPORun(wifi_env, load_config(None, settings, model=str(tiny_model), output_dir=str(tmp_path / "run"),
                                        **{"grpo.iterations": 1}))
    run.train()
    assert seen == {"grpo": [True], "supervised": [True]}
    assert not run.policy.training  # left as found: eval
