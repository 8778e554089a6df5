"""Run the base model with every adapter switched off, and leave the adapters exactly as they were.

The router reads the frozen base model through the same weights the adapters sit on: adapters are
disabled with PEFT's ``disable_adapter`` context (never unloaded). PEFT restores the enabled/disabled
flag itself; a merged adapter, though, is unmerged by a disabled forward pass, so it is merged back here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any


def is_peft(model: Any) -> bool:
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover - peft is part of the train extra
        return False
    return isinstance(model, PeftModel)


def merged_adapters(model: Any) -> list[str]:
    """Names of adapters currently merged into the base weights (empty for a plain model)."""
    if not is_peft(model):
        return []
    from peft.tuners.tuners_utils import BaseTunerLayer

    for module in model.modules():
        if isinstance(module, BaseTunerLayer) and module.merged_adapters:
            return list(module.merged_adapters)
    return []


@contextmanager
def frozen_base(model: Any) -> Iterator[Any]:
    """``with frozen_base(model):`` forward passes see the base model only; no gradients."""
    import torch

    merged = merged_adapters(model)
    disabled = model.disable_adapter() if is_peft(model) else nullcontext()
    was_training = model.training
    model.eval()
    try:
        with disabled, torch.inference_mode():
            yield model
    finally:
        if merged and not merged_adapters(model):
            model.merge_adapter(merged)
        if was_training:
            model.train()
