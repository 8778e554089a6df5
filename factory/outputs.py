"""A command's output files, written all-or-nothing: the previous result or the new one, never a mix.

Every file is first written into a hidden staging folder inside the output folder (same file system, so the
moves below are renames); a write that fails (a full disk, a quota) removes the staging folder and leaves the
previous result exactly as it was. Only when every file is written are they renamed into place, with
SIGINT/SIGTERM held back for those few renames, the most important file last (``capabilities.json`` for
``factory analyze``: a reader that sees the new one sees everything new). Only a SIGKILL or a power cut in
the middle of the renames can leave a mix, and then ``INCOMPLETE.txt`` says so (it is written before the
first rename and removed after the last).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from env_registry.registry import fsync_dir

MARKER = "INCOMPLETE.txt"
STAGING_PREFIX = ".staging-"


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (main thread only; the renames take microseconds)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StagedOutputs:
    """``with StagedOutputs(out) as staged:`` write files to ``staged.path(name)``, then ``staged.commit()``.
    Leaving the block without a commit (an exception, a signal) removes what was staged."""

    def __init__(self, out: Path, last: str | None = None) -> None:
        self.out = Path(out)
        self.last = last
        self.staging: Path | None = None
        self.committed = False

    def __enter__(self) -> "StagedOutputs":
        self.out.mkdir(parents=True, exist_ok=True)
        self._sweep()
        self.staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=self.out))
        return self

    def __exit__(self, *exc: object) -> None:
        if self.staging is not None and not self.committed:
            shutil.rmtree(self.staging, ignore_errors=True)

    def _sweep(self) -> None:
        """Staging folders of writers that died (kill -9) are removed; a live writer's are left alone."""
        for item in self.out.glob(f"{STAGING_PREFIX}*"):
            pid = item.name.removeprefix(STAGING_PREFIX).split("-", 1)[0]
            if pid.isdigit() and not _pid_alive(int(pid)):
                shutil.rmtree(item, ignore_errors=True)

    def path(self, name: str) -> Path:
        assert self.staging is not None, "use StagedOutputs as a context manager"
        return self.staging / name

    def write_text(self, name: str, text: str) -> Path:
        path = self.path(name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        return path

    def commit(self, remove: Iterable[str] = ()) -> dict[str, Path]:
        """Move every staged file into the output folder (``last`` last) and delete ``remove`` (stale files of an
        earlier run that this one does not write); returns the final paths by name."""
        assert self.staging is not None
        names = sorted(p.name for p in self.staging.iterdir())
        if self.last in names:
            names.remove(self.last)
            names.append(self.last)
        marker = self.out / MARKER
        marker.write_text(
            "This folder was being replaced when its writer stopped: its files may come from two runs. Run the command again.\n",
            encoding="utf-8",
        )  # a full disk fails here, before anything moved
        with signals_held():
            moved = {}
            for name in names:
                os.replace(self.staging / name, self.out / name)
                moved[name] = self.out / name
            for name in remove:
                if name not in moved:
                    (self.out / name).unlink(missing_ok=True)
            fsync_dir(self.out)
            marker.unlink()
        self.committed = True
        shutil.rmtree(self.staging, ignore_errors=True)
        return moved
