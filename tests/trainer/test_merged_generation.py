"""Generation with the adapter folded into the base weights (issue 35's cost): the same next-token distribution
as the side path within float32 rounding, the same greedy turns, the LoRA side path not run, and the base
weights put back bit for bit (restored, not subtracted)."""

from __future__ import annotations

import random

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from trainer.chat import ChatFormat
from trainer.config import LoraSettings
from trainer.engines import TransformersEngine, merged_adapter
from trainer.model import attach_adapter

EPS = torch.finfo(torch.float32).eps


def adapted(tiny_model):
    model = attach_adapter(AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32), LoraSettings(rank=4, alpha=8), seed=0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)  # an adapter that changes the output, so folding it in is visible
    return model.eval()


def test_merged_logits_equal_the_side_path_and_weights_come_back_exactly(tiny_model) -> None:
    model = adapted(tiny_model)
    ids = torch.tensor([[random.Random(1).randrange(3, 2000) for _ in range(40)]])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with torch.no_grad():
        side = model(input_ids=ids).logits
        with model.disable_adapter():
            bare = model(input_ids=ids).logits
        lora_calls = [0]
        hooks = [m.register_forward_hook(lambda *_: lora_calls.__setitem__(0, lora_calls[0] + 1))
                 for n, m in model.named_modules() if n.endswith("lora_A.default")]
        with merged_adapter(model) as merged_layers:
            folded = model(input_ids=ids).logits
        for hook in hooks:
            hook.remove()
    assert merged_layers == len(hooks) > 0 and lora_calls[0] == 0  # every LoRA layer folded, its side path not run
    assert (side - bare).abs().max() > 1e-2  # the adapter matters
    scale = side.abs().max().item()
    torch.testing.assert_close(folded, side, rtol=0, atol=1000 * EPS * scale)  # float32 rounding of a different sum order
    for name, param in model.named_parameters():
        assert torch.equal(param, before[name]), name  # restored bit for bit
    assert not any(getattr(m, "merged", False) for m in model.modules())


def test_a_merged_engine_generates_the_same_greedy_turns(tiny_model) -> None:
    model = adapted(tiny_model)
    chat = ChatFormat(AutoTokenizer.from_pretrained(tiny_model))
    rng = random.Random(3)
    prompts = {k: [rng.randrange(3, 2000) for _ in range(30 + k)] for k in range(4)}
    turns = []
    for merge in (False, True):
        session = TransformersEngine(model, chat, temperature=0.0, max_new_tokens=12, merge_adapter=merge).session(dict(prompts))
        first = session.generate()
        for key in prompts:
            session.extend(key, [5, 6, 7])
        turns.append((first, session.generate()))
    assert turns[0] == turns[1]
    assert sum(len(g.tokens) for g in turns[0][0].values()) > 10
