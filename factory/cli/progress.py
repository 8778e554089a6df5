"""Progress that reads on a terminal and in a log: a live Rich bar where someone watches, lines where not.

A live bar redrawn in place turns into noise (or nothing) in a CI log or a ``| tee`` pipe, so when stderr is
not a terminal :func:`progress_display` returns a :class:`LineProgress` instead: the same calls as Rich's
``Progress`` (``add_task``, ``update``, ``advance``, ``remove_task``), written as one timestamped line per step
with the elapsed time and an estimate of what is left::

    [12:03:44] train precondition_verification-v0: 3/40 (8%), 41 s elapsed, about 8 min left; reward 0.31 0-var 0.50

Lines come at most every ``interval`` seconds per task ($TRACE_FACTORY_PROGRESS_SECONDS, default 10; a
command that finishes sooner prints none), except where a command asks for every step (``factory train``:
one line per iteration).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from factory.cli.common import escape_controls

INTERVAL_ENV_VAR = "TRACE_FACTORY_PROGRESS_SECONDS"
DEFAULT_INTERVAL_S = 10.0


def default_interval() -> float:
    try:
        return max(0.0, float(os.environ.get(INTERVAL_ENV_VAR, DEFAULT_INTERVAL_S)))
    except ValueError:
        return DEFAULT_INTERVAL_S


def duration(seconds: float) -> str:
    """``41 s``, ``8 min``, ``2 h 05 min``: precise enough for an estimate, short enough for a log line."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    hours, minutes = divmod(int(seconds // 60), 60)
    return f"{hours} h {minutes:02d} min"


@dataclass
class _Task:
    description: str
    total: float | None
    fields: dict[str, Any]
    started: float = field(default_factory=lambda: time.monotonic())
    completed: float = 0.0
    initial: float = 0.0  # done before this process started (a resumed run): not counted in the rate
    last_line: float = field(default_factory=lambda: time.monotonic())
    printed: int = 0
    visible: bool = True


class LineProgress:
    """Rich ``Progress``'s interface, printed as log lines (see the module docstring). ``status`` (or any field
    named in ``show``) is appended to each line."""

    def __init__(self, console: Console, interval: float | None = None, show: tuple[str, ...] = ("status", "passed")) -> None:
        self.console = console
        self.interval = default_interval() if interval is None else interval
        self.show = show
        self.tasks: dict[int, _Task] = {}

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None, completed: float = 0, visible: bool = True, **fields: Any) -> int:
        task_id = len(self.tasks)
        self.tasks[task_id] = _Task(description, total, dict(fields), completed=completed, initial=completed, visible=visible)
        return task_id

    def remove_task(self, task_id: int) -> None:
        self.tasks.pop(task_id, None)

    def reset(self, task_id: int, **kwargs: Any) -> None:
        task = self.tasks.get(task_id)
        if task is not None:
            task.completed, task.initial, task.started = 0.0, 0.0, time.monotonic()
            task.last_line = task.started

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def update(self, task_id: int, *, total: float | None = None, completed: float | None = None, advance: float | None = None,
               description: str | None = None, visible: bool | None = None, refresh: bool = False, **fields: Any) -> None:  # fmt: skip
        task = self.tasks.get(task_id)
        if task is None:
            return
        before = task.completed
        if total is not None:
            task.total = total
        if completed is not None:
            task.completed = completed
        if advance is not None:
            task.completed += advance
        if description is not None:
            task.description = description
        if visible is not None:
            task.visible = visible
        task.fields.update(fields)
        if task.completed == before:
            return  # no step taken: nothing new to say
        now = time.monotonic()
        finished = task.total is not None and task.completed >= task.total
        if not task.visible or (now - task.last_line < self.interval and not (finished and task.printed)):
            return
        task.last_line = now
        task.printed += 1
        self.console.print(self.line(task, now), highlight=False, soft_wrap=True, markup=False)

    def line(self, task: _Task, now: float) -> str:
        elapsed = now - task.started
        done = task.completed
        if task.total:
            count = f"{done:g}/{task.total:g} ({100 * done / task.total:.0f}%)"
            steps = done - task.initial
            left = (elapsed / steps * (task.total - done)) if steps > 0 else None
            eta = "done" if done >= task.total else (f"about {duration(left)} left" if left is not None else "")
        else:
            count, eta = f"{done:g}", ""
        extra = "; ".join(f"{task.fields[k]}" if k == "status" else f"{k} {task.fields[k]}" for k in self.show if task.fields.get(k) not in (None, ""))
        text = f"[{time.strftime('%H:%M:%S')}] {task.description}: {count}, {duration(elapsed)} elapsed" + (f", {eta}" if eta else "")
        return escape_controls(text + (f"; {extra}" if extra else ""))


def default_columns(*extra: ProgressColumn) -> tuple[ProgressColumn, ...]:
    return (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), *extra, TimeElapsedColumn(), TimeRemainingColumn())


def progress_display(console: Console, *columns: ProgressColumn, enabled: bool = True, transient: bool = False,
                     interval: float | None = None, show: tuple[str, ...] = ("status", "passed")) -> Any:  # fmt: skip
    """A Rich bar on a terminal, :class:`LineProgress` elsewhere, nothing when not ``enabled``; use as a context
    manager and call ``add_task`` / ``update`` on it either way."""
    if not enabled:
        return Progress(*(columns or default_columns()), console=console, disable=True)
    if console.is_terminal:
        return Progress(*(columns or default_columns()), console=console, transient=transient)
    return LineProgress(console, interval=interval, show=show)


class GateLines:
    """The interface of ``factory.validation.progress.GateProgress`` (``callback``, ``progress``, ``task``,
    ``label``), as log lines: one per finished check, at most every ``interval`` seconds."""

    def __init__(self, console: Console, label: str, extra_checks: int = 0, interval: float | None = None) -> None:
        from factory.validation.gate import CHECK_NAMES

        self.progress = LineProgress(console, interval=interval)
        self.label = escape_controls(label)
        self.task = self.progress.add_task(self.label, total=len(CHECK_NAMES) + extra_checks)

    def __enter__(self) -> "GateLines":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @property
    def callback(self) -> Any:
        def update(name: str, result: Any) -> None:
            if result is not None:
                verdict = "skipped" if result.skipped else "pass" if result.passed else "FAIL"
                self.progress.update(self.task, advance=1, status=f"{name} {verdict}")

        return update


def gate_progress(console: Console, label: str, enabled: bool = True, extra_checks: int = 0) -> Any:
    """The gate's live bar on a terminal (transient), :class:`GateLines` in a log, nothing when not ``enabled``."""
    from factory.validation.progress import GateProgress

    if enabled and not console.is_terminal:
        return GateLines(console, label, extra_checks)
    return GateProgress(console, label, enabled=enabled, extra_checks=extra_checks)
