"""A rollout's output folder: its settings, its trajectories (one JSONL line per finished episode), its summary.

Resuming is reading this folder back: an episode whose line is in ``trajectories.jsonl`` without an error is
finished and never runs again; an episode that ended in an error (target, user or policy failure) is
dropped from the file and runs again. A last line cut short by a crash is dropped too; any other bad line
stops the run with its line number, because it means the file was edited. The settings that decide what
an episode means (target, policy, user, judge, limits, seed) must match the folder's ``run.json``, and every
kept trajectory's task must still have the same ``task_version``. A lock keeps two rollouts out of one folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from pydantic import BaseModel, ValidationError

from schemas.errors import InputError
from schemas.files import read_state, state_file_message, write_atomic
from schemas.jsonl import jsonl_lines
from schemas.trajectory import Trajectory

RUN_FILE = "run.json"
TRAJECTORIES_FILE = "trajectories.jsonl"
SUMMARY_FILE = "summary.json"
LOCK_FILE = ".rollout.lock"


class RunSettings(BaseModel):
    """What must be equal for two invocations to be the same run (``--trials`` and ``--task-ids`` may grow)."""

    target: str
    backend: str
    server: str | None = None
    tasks_source: str
    policy: str
    user: str
    judge: str | None = None
    max_steps: int
    max_errors: int
    seed: int
    temperature: float | None = None
    max_tokens: int | None = None


def error_of(trajectory: Trajectory) -> tuple[str, str] | None:
    """(kind, message) when the episode ended in an error that was not the agent's measured failure."""
    for kind in ("infrastructure_error", "agent_error", "internal_error"):
        message = trajectory.metadata.get(kind)
        if message:
            return kind.removesuffix("_error"), str(message)
    return None


def _trial(trajectory: Trajectory) -> int:
    """The episode's trial number (``metadata.trial``); ValueError says where and what when it has none."""
    value = trajectory.metadata.get("trial")
    if value is None:
        raise ValueError("metadata.trial: required key is missing")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"metadata.trial: not an integer (got {value!r:.60})") from None


class RolloutStore:
    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.path = self.out / TRAJECTORIES_FILE
        self._lock: FileLock | None = None
        self._handle: Any = None
        self._kept = 0

    def __enter__(self) -> "RolloutStore":
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create output folder {self.out}: {exc.strerror or exc}; pass another --out") from None
        self._lock = FileLock(str(self.out / LOCK_FILE))
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise InputError(f"another rollout is writing to {self.out}; wait for it or pass another --out") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self._lock is not None:
            self._lock.release()
            (self.out / LOCK_FILE).unlink(missing_ok=True)

    def open(self, settings: RunSettings, versions: dict[str, str]) -> list[Trajectory]:
        """Check the folder belongs to this run, drop errored episodes, and return the finished ones."""
        run_file = self.out / RUN_FILE
        if run_file.exists():
            before = read_state(run_file, RunSettings, "remove it (and the folder's trajectories) or pass another --out")
            changed = [
                f"{name} {getattr(before, name)!r} -> {getattr(settings, name)!r}"
                for name in RunSettings.model_fields
                if getattr(before, name) != getattr(settings, name)
            ]
            if changed:
                raise InputError(f"{self.out} holds a run with other settings ({'; '.join(changed)}); pass another --out to start a new run")
        finished = self._read_finished(versions)
        self._rewrite(finished)
        self._kept = len(finished)
        write_atomic(run_file, settings.model_dump_json(indent=2) + "\n")  # never half a run.json to refuse next time
        return finished

    def _read_finished(self, versions: dict[str, str]) -> list[Trajectory]:
        if not self.path.exists():
            return []
        try:
            lines = jsonl_lines(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(state_file_message(self.path, exc, "remove it to start the rollout over, or pass another --out")) from None
        kept: dict[tuple[str, int], Trajectory] = {}
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                trajectory = Trajectory.model_validate_json(line)
                trial = _trial(trajectory)
            except (ValidationError, ValueError) as exc:
                if number == len(lines):  # a line cut short by an interrupted write
                    continue
                raise InputError(state_file_message(self.path, exc, "remove that line to resume", line=number, model=Trajectory)) from None
            if error_of(trajectory) is not None:
                continue
            version = versions.get(trajectory.task_id)
            if version is not None and trajectory.metadata.get("task_version") != version:
                raise InputError(
                    f"task {trajectory.task_id} changed since {self.out} was written (task_version differs); pass another --out"
                )
            kept[(trajectory.task_id, trial)] = trajectory
        return list(kept.values())

    def _rewrite(self, trajectories: list[Trajectory]) -> None:
        temporary = self.path.with_suffix(".jsonl.tmp")
        with temporary.open("w", encoding="utf-8") as handle:
            for trajectory in trajectories:
                handle.write(trajectory.model_dump_json(exclude_none=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)

    def append(self, trajectory: Trajectory) -> None:
        """One line, flushed and synced: an interrupted run loses at most the episodes in flight."""
        if self._handle is None:
            self._handle = self.path.open("a", encoding="utf-8")
        self._handle.write(trajectory.model_dump_json(exclude_none=True) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def appended(self) -> list[Trajectory]:
        """What this run added to the file, read back from it: the file, not a list in memory, is what a resume
        will see, and an interrupt that lands between a write and its bookkeeping cannot make the two disagree."""
        lines = [line for line in jsonl_lines(self.path.read_text(encoding="utf-8")) if line.strip()]
        added = []
        for line in lines[self._kept :]:
            try:
                added.append(Trajectory.model_validate_json(line))
            except ValidationError:
                continue  # only a last line cut short can fail here: every line past the kept ones is ours
        return added

    def write_summary(self, summary: BaseModel) -> Path:
        """The run's last write, whole or not at all: a crash or a full disk mid-write leaves the previous summary."""
        path = self.out / SUMMARY_FILE
        write_atomic(path, summary.model_dump_json(indent=2) + "\n")
        return path

    @staticmethod
    def load(out: Path) -> list[Trajectory]:
        """All trajectories of a folder (for tests and tools); no checks beyond the schema."""
        path = Path(out) / TRAJECTORIES_FILE
        return [Trajectory.model_validate(json.loads(line)) for line in jsonl_lines(path.read_text(encoding="utf-8")) if line.strip()]
