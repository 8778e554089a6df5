"""Checkpoints that resume a run exactly: adapter, optimizer, every rank's RNG states, and where we were.

Layout (one folder per checkpoint, written to a temporary name and renamed, so a crash never leaves a
half checkpoint)::

    checkpoints/iter-000005/adapter/        PEFT adapter (adapter_config.json + adapter_model.safetensors
                                            + trained_prompt.json: how its conversations were rendered)
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
from collections.abc import Callable
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from env_registry.conversation import TrainedPrompt, write_trained_prompt
from schemas.errors import InputError, one_line
from schemas.files import TRAIN_RUN_FILE, TrainRunFile, adapter_problem, read_state, read_train_run
from trainer.errors import TrainError
from trainer.portable_adapter import make_portable

_NAME = re.compile(r"^iter-(\d{6})$")
METRICS_FILE = "metrics.jsonl"
RUN_FILE = TRAIN_RUN_FILE


class ResumeError(TrainError, InputError):
    """The run folder and ``--resume`` disagree (nothing to resume, another env's run, a run already there), or
    a checkpoint is damaged: bad input, never a silent restart."""


class CheckpointWriteError(TrainError):
    """A checkpoint could not be written (a full disk): the run failed (exit 1); nothing half-written is kept."""


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
    root: Path, iteration: int, policy: Any, optimizer: Any, accelerator: Any, extra: dict[str, Any], keep: int,
    rng: dict[str, Any] | None = None, prompt: TrainedPrompt | None = None,
) -> Path:
    """Every rank writes its RNG state (``rng``: one taken earlier, when the run was stopped after it moved on);
    the main process writes the rest (``prompt``: recorded in the adapter folder) and renames into place."""
    folder = root / "checkpoints"
    final = folder / f"iter-{iteration:06d}"
    staging = folder / f".staging-iter-{iteration:06d}"
    try:
        if accelerator.is_main_process:
            folder.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
        accelerator.wait_for_everyone()
        torch.save(rng if rng is not None else rng_state(), staging / f"rng-rank{accelerator.process_index}.pt")
        if accelerator.is_main_process:
            policy.save_pretrained(str(staging / "adapter"))
            make_portable(staging / "adapter")
            if prompt is not None:
                write_trained_prompt(staging / "adapter", prompt)
            torch.save(optimizer.state_dict(), staging / "optimizer.pt")
            (staging / "state.json").write_text(json.dumps({"iteration": iteration, **extra}, indent=2) + "\n")
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            shutil.rmtree(final, ignore_errors=True)
            os.rename(staging, final)
    except (OSError, RuntimeError) as exc:  # a full disk: torch.save says it as a RuntimeError
        shutil.rmtree(staging, ignore_errors=True)  # never a half checkpoint left behind
        raise CheckpointWriteError(_write_failure(final, exc, root)) from None
    if accelerator.is_main_process:
        for old in sorted(p for p in folder.iterdir() if _NAME.match(p.name))[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def _write_failure(final: Path, exc: BaseException, root: Path) -> str:
    """One line for a checkpoint that could not be written: which, why, and how to go on (exit 1: the run failed)."""
    from schemas.errors import one_line
    from schemas.files import reason

    why = reason(exc) if isinstance(exc, OSError) else one_line(exc)
    if isinstance(exc, OSError) and exc.filename:
        why = f"{exc.filename}: {why}"
    earlier = latest(root)
    how = (f"free some space, then run the same command with --resume to go on from {earlier.name}" if earlier is not None
           else "free some space, then run the same command again")
    return f"cannot write checkpoint {final} ({why}); nothing half-written was kept; {how}"


def partial_run(root: Path) -> bool:
    """Whether ``root`` holds a run stopped before its first checkpoint (a kill -9 or a full disk): its
    ``metrics.jsonl`` or ``run.json`` and no checkpoint. Both a new run and ``--resume`` start it over."""
    return latest(root) is None and any((root / name).exists() for name in (METRICS_FILE, RUN_FILE))


def clear_partial(root: Path) -> list[str]:
    """Remove what a run stopped before its first checkpoint left (its metrics, run.json, half-written
    checkpoint folders); the names removed, for the line that says so."""
    removed = []
    for name in (METRICS_FILE, RUN_FILE):
        if (root / name).exists():
            (root / name).unlink(missing_ok=True)
            removed.append(name)
    folder = root / "checkpoints"
    if folder.is_dir():
        for staging in folder.glob(".staging-iter-*"):
            shutil.rmtree(staging, ignore_errors=True)
            removed.append(f"checkpoints/{staging.name}")
    return removed


def resume_point(root: Path, env_id: str, config: Any, resume: bool | str, clear: bool = True,
                 note: Callable[[str], None] | None = None) -> Path | None:  # fmt: skip
    """The checkpoint a run starts from, after checking that the folder and the flag agree.

    ``resume`` True (``--resume``): there must be a checkpoint of this env with the same model and adapter
    shape, else :class:`ResumeError` says why (exit 2); never a silent restart. False: the folder must hold
    no checkpoint. ``"auto"`` (the pipeline, whose folders are its own): resume when a checkpoint exists.

    A run stopped before its first checkpoint (:func:`partial_run`) is never a dead end: every mode starts it
    over, removing what it left (``clear``: only the main process removes) and saying so through ``note``.
    A checkpoint whose adapter is missing or cut short is :class:`ResumeError` naming the file, before the model loads.
    """
    found = latest(root)
    if found is None and partial_run(root):
        removed = clear_partial(root) if clear else []
        if note is not None:
            why = "holds no checkpoint to resume" if resume is True else "held a run"
            note(f"{root} {why}: its run stopped before its first iteration finished (a kill or a full disk); "
                 f"starting from iteration 0" + (f" (removed its {', '.join(removed)})" if removed else ""))
        return None
    if resume is False:
        if found:
            raise ResumeError(f"{root} already holds a run (last checkpoint {found.name}); pass --resume to continue it "
                              "or choose another --output")
        return None
    if found is None:
        if resume == "auto":
            return None
        what = "does not exist" if not root.exists() else "is empty"
        raise ResumeError(f"cannot resume: {root} {what}; run the same command without --resume to start a run there")
    state = load_state(found)
    from trainer.report import read_metrics

    read_metrics(root)  # a damaged metrics.jsonl is said now, before the model loads (exit 2)
    if state.get("env_id") not in (None, env_id):
        raise ResumeError(f"cannot resume: {root} holds a run of {state.get('env_id')}, not {env_id}; pass its env or another --output")
    before = read_run(root)
    for key, now in (("model", config.model), ("lora", config.lora.model_dump(mode="json"))):
        if before is not None and key in before.config and not _same(before.config[key], now):
            raise ResumeError(f"cannot resume: {root} was trained with {key} {before.config[key]!r}, not {now!r}; "
                              f"pass the same {key} or another --output")
    fix = f"remove {found} to resume from an earlier checkpoint, or run without --resume into another --output"
    if problem := adapter_problem(found / "adapter", fix):  # cut short by a full disk or a kill: said before the model loads
        raise ResumeError(f"cannot resume: {problem}")
    return found


def _same(before: Any, now: Any) -> bool:
    """Equal settings; a model folder given once as a relative and once as an absolute path is the same model."""
    if before == now:
        return True
    if isinstance(before, str) and isinstance(now, str) and Path(before).exists() and Path(now).exists():
        return Path(before).resolve() == Path(now).resolve()
    return False


def read_run(root: Path) -> TrainRunFile | None:
    """The run folder's ``run.json`` (:func:`schemas.files.read_train_run`, the one reader); damaged: exit 2."""
    return read_train_run(root, f"remove {root / RUN_FILE} (the settings are checked against it) or pass another --output", ResumeError)


class CheckpointState(BaseModel):
    """A checkpoint's ``state.json``: the iteration it closes and the seed order's generator state (more keys kept)."""

    model_config = ConfigDict(extra="allow")
    iteration: int = Field(ge=0)
    order: list[int]
    env_id: str | None = None


def load_state(checkpoint: Path) -> dict[str, Any]:
    """``state.json`` as a dict; a damaged one is :class:`ResumeError` (exit 2) naming the file, the key and the fix."""
    path = checkpoint / "state.json"
    fix = f"remove {checkpoint} to resume from an earlier checkpoint"
    return read_state(path, CheckpointState, fix, ResumeError).model_dump()


def restore(checkpoint: Path, optimizer: Any, accelerator: Any) -> dict[str, Any]:
    """Optimizer and this rank's RNG from ``checkpoint`` (the adapter is loaded when the model is built)."""
    state = load_state(checkpoint)
    rng_file = checkpoint / f"rng-rank{accelerator.process_index}.pt"
    if not rng_file.exists():
        raise ResumeError(f"checkpoint {checkpoint} was written by fewer processes; resume with the same number of processes")
    try:
        optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location=accelerator.device, weights_only=True))
        set_rng_state(torch.load(rng_file, weights_only=False))
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        raise ResumeError(f"checkpoint {checkpoint} is damaged ({one_line(exc)[:300]}); remove it to resume from an earlier checkpoint") from None
    return state


def write_adapter(policy: Any, folder: Path, prompt: TrainedPrompt | None = None) -> Path:
    """The final adapter in PEFT's standard format, written next to its final name and renamed; ``prompt`` (how
    the run rendered conversations) goes with it, so rollout and evaluation render them the same way."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".adapter-", dir=folder.parent))
    try:
        policy.save_pretrained(str(staging))
        make_portable(staging)
        if prompt is not None:
            write_trained_prompt(staging, prompt)
        if folder.exists():
            shutil.rmtree(folder)
        os.rename(staging, folder)
    except (OSError, RuntimeError) as exc:  # a full disk (torch and safetensors may say it as a RuntimeError)
        from schemas.files import reason

        why = f"{exc.filename}: {reason(exc)}" if isinstance(exc, OSError) and exc.filename else reason(exc) if isinstance(exc, OSError) else one_line(exc)
        raise CheckpointWriteError(f"cannot write the adapter {folder} ({why}); nothing half-written was kept; free some space, "
                                   "then run the same command with --resume (it goes on from the last checkpoint, or starts over if there is none)") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


LOCK_FILE = ".train.lock"


def lock_run(root: Path) -> Any:
    """Hold ``root`` for this process's run (a ``filelock.FileLock``, released when the process ends): a second
    ``factory train`` into the same folder is :class:`ResumeError` (exit 2), never a second writer of its files."""
    from filelock import FileLock, Timeout

    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(root / LOCK_FILE))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ResumeError(f"another `factory train` is writing to {root}; wait for it to end or pass another --output") from None
    return lock


def unlock_run(root: Path, lock: Any) -> None:
    lock.release()
    (root / LOCK_FILE).unlink(missing_ok=True)
