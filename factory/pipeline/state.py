"""The run folder's record of its stages (``pipeline.json``): key, status, what each stage handed on.

A stage's *key* digests its own config section and what its inputs handed over; its *handoff* is what the
next stages read: ``value`` (digested: the part later stages depend on), ``files`` (checked before a
finished stage is trusted) and ``info`` (figures for the report, never digested). The record is written
atomically after every change, so a killed run leaves the last state it reached.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout
from pydantic import BaseModel, Field

from schemas.errors import InputError
from schemas.files import read_state, write_atomic
from factory.pipeline.digests import tree_digest, value_digest

STATE_FILE = "pipeline.json"
LOCK_FILE = ".pipeline.lock"


def now() -> datetime:
    return datetime.now(timezone.utc)


class Handoff(BaseModel):
    value: dict[str, Any] = Field(default_factory=dict, description="what later stages consume (digested)")
    files: dict[str, str] = Field(default_factory=dict, description="path (relative to the run folder, or absolute) -> digest")
    info: dict[str, Any] = Field(default_factory=dict, description="figures for the report (not digested)")

    def digest(self, keys: tuple[str, ...] | None = None) -> str:
        """The digest of ``value``, or of the listed parts of it only."""
        part = self.value if keys is None else {k: self.value.get(k) for k in keys}
        return value_digest(part)


class StageRecord(BaseModel):
    key: str
    parts: dict[str, str] = Field(default_factory=dict, description="digest of each input the key was made from")
    status: Literal["running", "done", "failed"]
    started_at: datetime = Field(default_factory=now)
    finished_at: datetime | None = None
    seconds: float = Field(default=0.0, description="time spent in this stage over all attempts with this key")
    attempts: int = 1
    handoff: Handoff | None = None
    error: str | None = None


class Event(BaseModel):
    """What one invocation did with one stage: ran it, resumed it, or found it done (cached)."""

    stage: str
    action: Literal["ran", "resumed", "cached", "failed", "interrupted"]
    at: datetime = Field(default_factory=now)
    seconds: float = 0.0
    why: str = ""


class PipelineState(BaseModel):
    schema_version: int = 1
    config_file: str | None = None
    stages: dict[str, StageRecord] = Field(default_factory=dict)
    history: list[Event] = Field(default_factory=list)


def intact(handoff: Handoff, run_dir: Path) -> str | None:
    """None when every file a handoff lists is still there with the same content, else what changed."""
    for name, digest in handoff.files.items():
        path = Path(name) if Path(name).is_absolute() else run_dir / name
        if not path.exists():
            return f"{name} is missing"
        if tree_digest(path) != digest:
            return f"{name} changed since the stage finished"
    return None


class StateStore:
    """``pipeline.json`` of one run folder, held under a lock so two runs never share a folder."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / STATE_FILE
        self._lock: FileLock | None = None
        self.state = PipelineState()

    def __enter__(self) -> "StateStore":
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(self.run_dir / LOCK_FILE))
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise InputError(f"another `factory run` is using {self.run_dir}; wait for it or pass another --run-dir") from None
        self.state = self.load()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            self._lock.release()

    def load(self) -> PipelineState:
        if not self.path.exists():
            return PipelineState()
        return read_state(self.path, PipelineState, "remove it to run every stage again, or pass another --run-dir")

    def save(self) -> None:
        write_atomic(self.path, self.state.model_dump_json(indent=2) + "\n")
