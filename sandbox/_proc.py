"""Local processes (bwrap or plain): rlimits, a wall timeout, output caps, no hangs, and the set a sandbox started.

One thread does everything for ``exec``: a selector over stdout, stderr, stdin and a pidfd. It
never blocks on a pipe past the deadline, so a job that floods its output or an orphan that keeps
a pipe open cannot hang the caller; killing never depends on the reader making progress.
"""

from __future__ import annotations

import os
import resource
import select
import selectors
import signal
import subprocess
import threading
import time
from typing import Callable, Sequence

from sandbox.base import Channel, ExecResult, OutputCapture, SandboxLimits, signal_reason

_CHUNK = 1 << 16
#: How long we keep draining pipes after the main process exited (orphans may hold them open).
_EXIT_GRACE_S = 0.3


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def set_rlimits(limits: SandboxLimits) -> None:
    """Apply the per-process limits (runs in the forked child, before exec)."""
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_mb * mb, limits.file_size_mb * mb))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class ProcessSet:
    """The local processes a sandbox started and has not seen end yet, so that ``close()`` can kill the rest."""

    def __init__(self) -> None:
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    def add(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.add(proc)

    def discard(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.discard(proc)

    def kill_all(self, wait_s: float = 5.0) -> None:
        """SIGKILL every group, then wait for each (a launcher that outlives the wait is left to the caller)."""
        with self._lock:
            procs = list(self._procs)
            self._procs.clear()
        for p in procs:
            _killpg(p.pid)
        for p in procs:
            try:
                p.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                pass


def spawn(
    argv: Sequence[str],
    *,
    cwd: str,
    env: dict[str, str] | None,
    preexec_fn: Callable[[], None] | None,
    pass_fds: Sequence[int] = (),
    stdin: bool,
) -> subprocess.Popen:
    """Start argv as the leader of a new session (so the whole group can be killed)."""
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=preexec_fn,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
        close_fds=True,
    )


def run_job(
    proc: subprocess.Popen,
    *,
    stdin_data: bytes | None,
    timeout_s: float,
    output_cap: int,
    started: float,
    kill: Callable[[], None] | None = None,
    exit_code_of: Callable[[int], tuple[int | None, str | None]] | None = None,
) -> ExecResult:
    """Pump the process's pipes until it ends, the deadline passes or the output cap is hit."""
    kill = kill or (lambda: _killpg(proc.pid))
    out, err = OutputCapture(output_cap), OutputCapture(output_cap)
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    for f, cap in ((proc.stdout, out), (proc.stderr, err)):
        os.set_blocking(f.fileno(), False)
        sel.register(f.fileno(), selectors.EVENT_READ, cap)
    pidfd = os.pidfd_open(proc.pid)
    sel.register(pidfd, selectors.EVENT_READ, "exit")
    pending = memoryview(stdin_data or b"")
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        if pending:
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, "stdin")
        else:
            proc.stdin.close()

    deadline = started + timeout_s
    killed_reason: str | None = None
    exited_at: float | None = None
    open_pipes = 2
    try:
        while True:
            now = time.monotonic()
            if exited_at is not None and (open_pipes == 0 or now - exited_at > _EXIT_GRACE_S):
                break
            if killed_reason is None and now >= deadline:
                killed_reason = "timeout"
                kill()
                deadline = now + 5.0  # hard bound on draining after the kill
            elif killed_reason is not None and now >= deadline:
                break  # killed and still not gone: give up waiting (never hang the caller)
            wait = deadline - now
            if exited_at is not None:
                wait = min(wait, _EXIT_GRACE_S - (now - exited_at))
            for key, _ in sel.select(timeout=max(0.0, wait)):
                tag = key.data
                if tag == "exit":
                    sel.unregister(pidfd)
                    exited_at = time.monotonic()
                elif tag == "stdin":
                    try:
                        n = os.write(key.fd, pending[:_CHUNK])
                        pending = pending[n:]
                    except (BrokenPipeError, OSError):
                        pending = memoryview(b"")
                    if not pending:
                        sel.unregister(key.fd)
                        proc.stdin.close()  # type: ignore[union-attr]
                else:
                    try:
                        data = os.read(key.fd, _CHUNK)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(key.fd)
                        open_pipes -= 1
                        continue
                    if tag.feed(data) and killed_reason is None:
                        killed_reason = "output_cap"
                        kill()
                        deadline = time.monotonic() + 5.0
    finally:
        sel.close()
        os.close(pidfd)
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
    if killed_reason is not None:
        kill()  # the group may have survived the first kill in a race with fork
    try:
        rc = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        _killpg(proc.pid)  # the gentle kill did not finish the job: kill the launcher too
        try:
            rc = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
    code: int | None
    reason = killed_reason
    if killed_reason is not None:
        code = None
    elif exit_code_of is not None and rc is not None:
        code, reason = exit_code_of(rc)
    else:
        code, reason = rc, signal_reason(rc)
    return ExecResult(
        exit_code=code,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=killed_reason == "timeout",
        truncated=out.truncated or err.truncated,
        duration_s=round(time.monotonic() - started, 6),
        killed_reason=reason,
    )


class ProcessChannel(Channel):
    """A worker that is a local child process (bwrap or plain), read by the calling thread (:meth:`pump`)."""

    pumped_by_caller = True

    def __init__(self, proc: subprocess.Popen, kill: Callable[[], None] | None = None):
        super().__init__()
        self.proc = proc
        self._kill = kill or (lambda: _killpg(proc.pid))
        self._open: dict[int, Callable[[bytes], None]] = {}
        self._poll = select.poll()

    def start(self) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        for f, cb in ((self.proc.stdout, self.on_stdout), (self.proc.stderr, self.on_stderr)):
            self._open[f.fileno()] = cb
            self._poll.register(f.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)

    def pump(self, timeout_s: float) -> None:
        if not self._open:
            return
        for fd, _ in self._poll.poll(max(0, int(timeout_s * 1000)) + 1):
            callback = self._open.get(fd)
            if callback is None:
                continue
            try:
                data = os.read(fd, _CHUNK)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                callback(data)
                continue
            self._poll.unregister(fd)
            del self._open[fd]
            if not self._open:
                self.on_eof()

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def kill(self) -> None:
        self._kill()
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def exit_code(self, wait_s: float = 0.0) -> int | None:
        try:
            return self.proc.wait(timeout=wait_s) if wait_s else self.proc.poll()
        except subprocess.TimeoutExpired:
            return None
