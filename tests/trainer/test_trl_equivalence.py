"""Our GRPO loss and its gradients equal TRL's GRPOTrainer's on one batch, for the matching configuration.

One group of K = 4 multi-turn trajectories from one prompt (so no prompt padding), each with env tokens
inside the completion (TRL's ``tool_mask``), an asymmetric clip range, old log-probs away from the current
ones (so some ratios are clipped), with and without the KL term. Our side is the real update path
(``PolicyUpdate.grpo`` over ``TokenLogProbs``, two micro-batches); TRL's is ``GRPOTrainer._compute_loss``
with ``loss_type="grpo"`` or ``"dapo"`` (token losses averaged per trajectory, or over the batch's trained
tokens), ``importance_sampling_level="token"``, the same temperature, epsilon and beta, and
``use_bias_correction_kl=False`` (TRL 1.16 multiplies the KL term by the importance ratio by default; our KL
is the plain k3 estimator of DeepSeekMath, which is TRL's with that switch off).
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")

TEMPERATURE = 0.7
EPS_LOW, EPS_HIGH = 0.2, 0.28


def lora_model(tiny_model):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj"], init_lora_weights=False)
    return get_peft_model(base, config)


def batch(vocab: int):
    """(prompt, completions, trained masks, advantages): one prompt, four completions of different lengths."""
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(5, vocab, (9,), generator=g).tolist()
    lengths = [7, 12, 5, 10]
    completions = [torch.randint(5, vocab, (n,), generator=g).tolist() for n in lengths]
    masks = []
    for n in lengths:  # a generated turn, env tokens, another generated turn
        cut = n // 3
        masks.append([1] * cut + [0] * 2 + [1] * (n - cut - 2))
    advantages = [1.2, -0.4, 0.9, -1.7]
    return prompt, completions, masks, advantages


def grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad and p.grad is not None}


@pytest.mark.parametrize("loss_type", ["grpo", "dapo"])
@pytest.mark.parametrize("beta", [0.0, 0.05])
def test_loss_and_gradients_equal_trl(tiny_model, tmp_path, beta, loss_type) -> None:
    from accelerate import Accelerator
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from trainer.config import GRPOSettings
    from trainer.logprobs import TokenLogProbs
    from trainer.update import Item, PolicyUpdate

    model = lora_model(tiny_model)
    model.train()
    prompt, completions, masks, advantages = batch(model.config.vocab_size)

    # --- ours: the real update path (two micro-batches), gradients caught at the optimizer step
    settings = GRPOSettings(epsilon=EPS_LOW, epsilon_high=EPS_HIGH, kl_coef=beta, micro_batch_size=2, max_grad_norm=None,
                            loss_type=loss_type)
    module = TokenLogProbs(model, chunk=5, temperature=TEMPERATURE)
    caught: dict[str, torch.Tensor] = {}

    class Catch(torch.optim.SGD):
        def step(self, closure=None):  # noqa: ANN001
            caught.update(grads(model))

    update = PolicyUpdate(Accelerator(cpu=True), module, Catch([p for p in model.parameters() if p.requires_grad], lr=0.0),
                          settings, pad_id=0)
    items = [Item(prompt + c, [0] * len(prompt) + m, a) for c, m, a in zip(completions, masks, advantages)]
    current = update.score(items)
    shift = torch.Generator().manual_seed(2)
    for item, logp in zip(items, current):  # off-policy old log-probs: some ratios leave [1 - eps, 1 + eps_high]
        item.old_logp = logp + 0.3 * torch.randn(logp.shape, generator=shift)
    stats = update.grpo(items, items[0])
    if beta:
        assert all(item.ref_logp is not None for item in items)
    assert stats.clipped > 0 and stats.optimizer_steps == 1
    ours_loss = stats.loss

    # --- TRL: GRPOTrainer._compute_loss on the same batch (prompt + completion, env tokens in tool_mask)
    model.zero_grad(set_to_none=True)
    args = GRPOConfig(
        output_dir=str(tmp_path / "trl"), loss_type=loss_type, importance_sampling_level="token", epsilon=EPS_LOW,
        epsilon_high=EPS_HIGH, beta=beta, temperature=TEMPERATURE, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=16, use_cpu=True, report_to=[], bf16=False, logging_steps=1,
        use_bias_correction_kl=False,  # TRL 1.16's default weights the KL by the ratio (DeepSeek-V3.2); ours is plain k3
    )
    trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **kw: [0.0] * len(completions)], args=args,
                          train_dataset=Dataset.from_list([{"prompt": "x"}] * 4))
    trainer.current_gradient_accumulation_steps = 1
    width = max(len(c) for c in completions)

    def padded(rows, fill=0):
        return torch.tensor([r + [fill] * (width - len(r)) for r in rows])

    inputs = {
        "prompt_ids": torch.tensor([prompt] * 4), "prompt_mask": torch.ones(4, len(prompt), dtype=torch.long),
        "completion_ids": padded(completions), "completion_mask": padded([[1] * len(c) for c in completions]),
        "tool_mask": padded(masks), "advantages": torch.tensor(advantages),
        "old_per_token_logps": _spread([i.old_logp for i in items], masks, width),
        "num_items_in_batch": torch.tensor(sum(sum(m) for m in masks)),  # dapo: the batch's trained tokens
    }
    if beta:
        inputs["ref_per_token_logps"] = _spread([i.ref_logp for i in items], masks, width)
    model.train()
    trl_loss = trainer._compute_loss(trainer.model, inputs)
    trl_loss.backward()
    theirs = grads(model)

    assert ours_loss == pytest.approx(float(trl_loss.detach()), rel=1e-5, abs=1e-7)
    assert caught.keys() == theirs.keys() and len(theirs) > 0
    for name in theirs:
        # float32; TRL and we reduce the token losses in different orders and shapes: ~840 ulps (rtol 1e-4 / eps32)
        torch.testing.assert_close(caught[name], theirs[name], rtol=1e-4, atol=1e-6, msg=name)


def _spread(per_item: list[torch.Tensor], masks: list[list[int]], width: int) -> torch.Tensor:
    """Our per-trained-token values laid out over TRL's completion positions (0 where not trained)."""
    out = torch.zeros(len(masks), width)
    for row, (values, mask) in enumerate(zip(per_item, masks)):
        positions = [i for i, m in enumerate(mask) if m]
        out[row, positions] = values.float()
    return out
