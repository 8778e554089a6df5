"""Checkpoints that resume a run exactly: adapter, optimizer, every rank's RNG states, and where we were.

Layout (one folder per checkpoint, written to a temporary name and renamed, so a crash never leaves a
half checkpoint)::

    checkpoints/iter-000005/adapter/        PEFT adapter (adapter_config.json + adapter_model.safetensors)
    checkpoints/iter-000005/optimizer.pt    AdamW state
    checkpoints/iter-000005/rng-rank0.pt    python, torch (and CUDA) generator states of rank 0
    checkpoints/iter-000005/state.json      iteration done, config digest
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from trainer.errors import TrainError

_NAME = re.compile(r"^iter-(\d{6})$")


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def latest(root: Path) -> Path | None:
    folder = root / "checkpoints"
    if not folder.is_dir():
        return None
    found = sorted(p for p in folder.iterdir() if _NAME.match(p.name) and (p / "state.json").exists())
    return found[-1] if found else None


def save(
    root: Path, iteration: int, policy: Any, optimizer: Any, accelerator: Any, extra: dict[str, Any], keep: int
) -> Path:
    """Every rank writes its RNG state; the main process writes the rest and renames into place."""
    folder = root / "checkpoints"
    final = folder / f"iter-{iteration:06d}"
    staging = folder / f".staging-iter-{iteration:06d}"
    if accelerator.is_main_process:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
    accelerator.wait_for_everyone()
    torch.save(rng_state(), staging / f"rng-rank{accelerator.process_index}.pt")
    if accelerator.is_main_process:
        policy.save_pretrained(str(staging / "adapter"))
        torch.save(optimizer.state_dict(), staging / "optimizer.pt")
        (staging / "state.json").write_text(json.dumps({"iteration": iteration, **extra}, indent=2) + "\n")
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        shutil.rmtree(final, ignore_errors=True)
        os.rename(staging, final)
        for old in sorted(p for p in folder.iterdir() if _NAME.match(p.name))[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def load_state(checkpoint: Path) -> dict[str, Any]:
    try:
        return json.loads((checkpoint / "state.json").read_text())
    except (OSError, ValueError) as exc:
        raise TrainError(f"checkpoint {checkpoint} is unreadable ({exc.__class__.__name__}); remove it to resume from an earlier one") from None


def restore(checkpoint: Path, optimizer: Any, accelerator: Any) -> dict[str, Any]:
    """Optimizer and this rank's RNG from ``checkpoint`` (the adapter is loaded when the model is built)."""
    state = load_state(checkpoint)
    rng_file = checkpoint / f"rng-rank{accelerator.process_index}.pt"
    if not rng_file.exists():
        raise TrainError(f"checkpoint {checkpoint} was written by fewer processes; resume with the same number of processes")
    try:
        optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location=accelerator.device, weights_only=True))
        set_rng_state(torch.load(rng_file, weights_only=False))
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        raise TrainError(f"checkpoint {checkpoint} is damaged ({exc.__class__.__name__}: {str(exc)[:120]}); remove it") from None
    return state


def write_adapter(policy: Any, folder: Path) -> Path:
    """The final adapter in PEFT's standard format, written next to its final name and renamed."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".adapter-", dir=folder.parent))
    try:
        policy.save_pretrained(str(staging))
        if folder.exists():
            shutil.rmtree(folder)
        os.rename(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder
