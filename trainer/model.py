"""Host side: load the frozen base model and its tokenizer, and wrap it with the LoRA adapter PEFT trains."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch

from trainer.config import LoraSettings, TrainConfig
from schemas.errors import one_line
from trainer.errors import TrainError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_dtype(name: str) -> torch.dtype:
    if name != "auto":
        return DTYPES[name]
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def run_device() -> torch.device:
    """The device a run's models go on, the one ``trainer.loop.make_accelerator`` picks: this process's CUDA
    device when there is one, else the CPU. Evaluations outside a run (``evaluate_adapter``) use it too, so an
    adapter is judged on the device it was trained on."""
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def load_base(config: TrainConfig, model: str | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) for ``config.model`` (a folder, a hub id, or a folder holding ``gguf_file``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = model or config.model
    if not name:
        raise TrainError("no base model: pass --model PATH (a local folder or a hub id)")
    kwargs: dict[str, Any] = {}
    if os.path.sep in name or name.startswith("."):
        if not Path(name).exists():
            raise TrainError(f"--model {name}: no such folder; pass a local model folder or a hub id")
    if config.gguf_file:
        name = str(gguf_as_safetensors(name, config.gguf_file))
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, **kwargs)
        base = AutoModelForCausalLM.from_pretrained(name, dtype=resolve_dtype(config.dtype), **kwargs)
    except (OSError, ValueError) as exc:
        raise TrainError(f"cannot load model {name!r}: {one_line(exc)[:600]}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return base, tokenizer


def gguf_as_safetensors(folder: str, gguf_file: str, cache: Path | None = None) -> Path:
    """A GGUF model as a plain safetensors folder, converted once and cached (keyed by the file's size and
    mtime). transformers de-quantises GGUF weights on every load (~25 s for SmolLM2-135M) and refuses to
    save a GGUF-loaded model, so the weights are copied into a fresh model of the same config."""
    import hashlib
    import shutil
    import tempfile

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainer.tiny_model import default_model_cache

    source = Path(folder) / gguf_file
    if not source.is_file():
        raise TrainError(f"--gguf-file {gguf_file}: no such file in {folder}")
    stat = source.stat()
    key = hashlib.sha256(f"{source.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    root = cache or default_model_cache()
    final = root / f"gguf-{source.stem}-{key}"
    if (final / "config.json").exists():
        return final
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".gguf-", dir=root))
    try:
        try:
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
            loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file, dtype=torch.float32)
        except (OSError, ValueError, ImportError) as exc:
            raise TrainError(f"cannot read {source} as GGUF ({one_line(exc)[:600]}); GGUF needs the gguf package: pip install gguf") from None
        settings = loaded.config.to_dict()
        settings.pop("quantization_config", None)
        plain = AutoModelForCausalLM.from_config(type(loaded.config).from_dict(settings), dtype=torch.float32)
        plain.load_state_dict(loaded.state_dict())
        plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        try:
            os.rename(staging, final)
        except OSError:  # another process converted it first; its copy is the same
            pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


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
