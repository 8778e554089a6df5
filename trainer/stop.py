"""Host side: a training run that is stopped (SIGTERM from a batch scheduler or ``timeout``, Ctrl-C) ends
cleanly, with a checkpoint and the command that resumes it; and when to write checkpoints at all.

On the first signal the run stops at the next safe point:

- during rollouts (most of an iteration's time) it abandons the iteration at once: the adapter and the
  optimizer are still those of the last finished iteration, so that iteration's checkpoint is written (with
  the random state saved at the start of the abandoned one, so the resume replays it exactly);
- during the update (:meth:`StopSignal.deferred`) it lets the update finish, records the iteration and
  checkpoints it, so no update is ever half applied.

A second signal stops at once, wherever it lands (nothing is checkpointed from a half-applied update). Under
DDP (several processes) a rank never abandons mid-iteration, where its peers may wait in a collective: the
ranks agree on stopping at the end of the iteration.

Checkpoints: with ``save_every`` unset (the default) a checkpoint is written after the first iteration, then
whenever the time since the last one is at least ``COST_RATIO`` times what writing one took, so checkpoints
cost at most about 1/``COST_RATIO`` of the run; on small runs (a LoRA adapter written in well under a second,
iterations of seconds to minutes) that is every iteration. The last iteration is always checkpointed.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from schemas.errors import Interrupted

COST_RATIO = 10.0
"""With ``save_every`` unset: checkpoint once the time since the last one is at least this many times its cost."""


class TrainingStopped(Interrupted):
    """A run ended by a signal at a safe point. ``finished`` is the last iteration whose update is complete
    (-1: none), ``checkpoint`` the checkpoint that holds it (None: nothing to resume from)."""

    def __init__(self, signum: int, finished: int, checkpoint: Path | None, abandoned: bool) -> None:
        super().__init__(signum)
        self.finished = finished
        self.checkpoint = checkpoint
        self.abandoned = abandoned


class _Abandon(Interrupted):
    """Raised in the main thread by the first signal outside a deferred span: leave the iteration now."""


class StopSignal:
    """SIGTERM/SIGINT handlers for the span of a training run (main thread only; elsewhere nothing changes)."""

    def __init__(self, abandon: bool = True) -> None:
        self.abandon = abandon
        self.signum: int | None = None
        self.cut = False  # a deferred span (an update) was cut by a second signal: its state is half applied
        self._deferred = 0
        self._previous: dict[int, Any] = {}
        self._hook: Any = None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def __enter__(self) -> "StopSignal":
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGTERM, signal.SIGINT):
                self._previous[s] = signal.signal(s, self._handle)
            self._hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous.clear()
        if self._hook is not None:
            sys.unraisablehook, self._hook = self._hook, None

    def _unraisable(self, report: Any) -> None:
        """A first signal that lands inside a finalizer (a weakref callback, ``__del__``) cannot leave the
        iteration from there; Python would print its traceback and drop it. The stop is still requested and
        the run stops at the iteration's end, so that report is not printed; any other goes to the old hook."""
        if isinstance(report.exc_value, _Abandon):
            return
        self._hook(report)

    def _handle(self, signum: int, frame: Any) -> None:
        first = self.signum is None
        self.signum = signum if first else self.signum
        if not first:
            raise Interrupted(signum, "second signal: stopping at once")
        if self.abandon and not self._deferred:
            raise _Abandon(signum)

    @contextmanager
    def deferred(self, half_applied_if_cut: bool = True) -> Iterator[None]:
        """A span a first signal does not cut (the update; recording a finished iteration): the stop waits for
        its end. A second signal does cut it; ``half_applied_if_cut`` says the model's state is then unusable."""
        self._deferred += 1
        try:
            yield
        except BaseException:
            self.cut = self.cut or half_applied_if_cut
            raise
        finally:
            self._deferred -= 1


def is_abandon(exc: BaseException) -> bool:
    return isinstance(exc, _Abandon)


class CheckpointClock:
    """When to checkpoint: every ``save_every`` iterations if set, else by cost (see the module docstring)."""

    def __init__(self, save_every: int | None) -> None:
        self.save_every = save_every
        self.last_saved_at: float | None = None
        self.last_cost = 0.0

    def due(self, iteration: int, end: int) -> bool:
        if iteration + 1 == end:
            return True
        if self.save_every is not None:
            return (iteration + 1) % self.save_every == 0
        if self.last_saved_at is None:
            return True
        return time.monotonic() - self.last_saved_at >= COST_RATIO * self.last_cost

    @contextmanager
    def saving(self) -> Iterator[None]:
        started = time.monotonic()
        yield
        self.last_saved_at = time.monotonic()
        self.last_cost = self.last_saved_at - started
