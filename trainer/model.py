"""Host side: load the frozen base model and its tokenizer, and wrap it with the LoRA adapter PEFT trains."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch

from trainer.config import LoraSettings, TrainConfig
from trainer.errors import TrainError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_dtype(name: str) -> torch.dtype:
    if name != "auto":
        return DTYPES[name]
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def load_base(config: TrainConfig, model: str | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) for ``config.model`` (a folder, a hub id, or a folder holding ``gguf_file``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = model or config.model
    if not name:
        raise TrainError("no base model: pass --model PATH (a local folder or a hub id)")
    kwargs: dict[str, Any] = {}
    if config.gguf_file:
        kwargs["gguf_file"] = config.gguf_file
    if os.path.sep in name or name.startswith("."):
        if not Path(name).exists():
            raise TrainError(f"--model {name}: no such folder; pass a local model folder or a hub id")
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, **kwargs)
        base = AutoModelForCausalLM.from_pretrained(name, dtype=resolve_dtype(config.dtype), **kwargs)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise TrainError(f"cannot load model {name!r}: {first}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return base, tokenizer


def linear_module_names(model: Any) -> list[str]:
    """Short names of the decoder's linear layers ("q_proj", "down_proj", ...): what ``all-linear`` means,
    written out so adapter_config.json lists plain module names (vLLM's --lora-modules reads them)."""
    output = model.get_output_embeddings()
    names = {
        name.rsplit(".", 1)[-1]
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and module is not output
    }
    return sorted(names)


def lora_config(model: Any, settings: LoraSettings) -> Any:
    from peft import LoraConfig

    targets = settings.target_modules
    if targets == "all-linear":
        targets = linear_module_names(model)
    elif isinstance(targets, str):
        targets = [targets]
    known = set(linear_module_names(model))
    unknown = [t for t in targets if t not in known]
    if unknown:
        raise TrainError(f"lora.target_modules: {unknown} are not linear layers of this model; choose from {sorted(known)}")
    return LoraConfig(
        r=settings.rank, lora_alpha=settings.alpha, lora_dropout=settings.dropout, target_modules=list(targets),
        bias="none", task_type="CAUSAL_LM",
    )


def attach_adapter(base: Any, settings: LoraSettings, adapter_dir: str | Path | None = None, seed: int = 0) -> Any:
    """The PEFT model: a fresh adapter (initialised from ``seed``), or a saved one to keep training."""
    from peft import PeftModel, get_peft_model

    if adapter_dir is not None:
        return PeftModel.from_pretrained(base, str(adapter_dir), is_trainable=True)
    torch.manual_seed(seed)
    return get_peft_model(base, lora_config(base, settings))


def trainable_parameters(model: Any) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


@contextmanager
def mode(model: Any, training: bool) -> Iterator[None]:
    """``model`` in train (or eval) mode for the block, then back to the mode it was in. Set explicitly:
    gradient checkpointing, for one, acts only in train mode, and generation leaves a model in eval mode."""
    was = model.training
    model.train(training)
    try:
        yield
    finally:
        model.train(was)
