"""The one sandbox interface every backend implements, and the host side of the JSON-lines worker.

Env code written by an LLM is untrusted. Everything that runs it goes through :class:`Sandbox`, so
that the isolation technology (bubblewrap, Docker, E2B, or - explicitly - none) is a deployment
choice rather than something each caller re-implements.
"""

from __future__ import annotations

import abc
import collections
import itertools
import json
import posixpath
import queue
import threading
import time
from typing import Any, Callable, ClassVar

from pydantic import BaseModel, ConfigDict, Field

# --------------------------------------------------------------------------------------------------
# boundary models


class SandboxLimits(BaseModel):
    """Resource limits applied to everything that runs in one sandbox.

    Per-process limits (CPU seconds, address space, file size) are rlimits in the bwrap and
    unsafe backends; Docker applies ``memory_mb`` and ``max_processes`` to the whole container.
    """

    model_config = ConfigDict(frozen=True)

    cpu_seconds: int = Field(30, ge=1, description="RLIMIT_CPU per process")
    memory_mb: int = Field(1024, ge=16, description="address space per process (bwrap/unsafe), container memory (docker)")
    file_size_mb: int = Field(64, ge=1, description="RLIMIT_FSIZE: largest file a process may write")
    max_processes: int = Field(64, ge=4, description="RLIMIT_NPROC (bwrap, non-root uid) / pids limit (docker)")
    wall_timeout_s: float = Field(60, gt=0, description="default wall-clock limit of one exec")
    output_cap_bytes: int = Field(1_000_000, ge=1024, description="default cap on each of stdout and stderr")


class ExecResult(BaseModel):
    """What one command inside the sandbox did. ``exit_code`` is None when the sandbox killed it."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    duration_s: float
    killed_reason: str | None = Field(
        None, description="'timeout', 'output_cap', or 'signal:NAME' when the job did not end by itself"
    )

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


# --------------------------------------------------------------------------------------------------
# errors


class SandboxError(RuntimeError):
    """A sandbox could not do what was asked (setup failed, bad path, closed sandbox...)."""


class SandboxUnavailable(SandboxError):
    """The requested backend cannot run on this machine; the message says how to fix it."""


class WorkerFailure(SandboxError):
    """A persistent worker did not answer a call normally: the root of the three cases below."""


class WorkerError(WorkerFailure):
    """The remote method raised. Carries the remote exception's type name, message and traceback."""

    def __init__(self, type: str, message: str, traceback: str | None = None):
        super().__init__(f"{type}: {message}")
        self.type = type
        self.message = message
        self.traceback = traceback


class WorkerTimeout(WorkerFailure):
    """A call did not answer in time. The worker was killed and is dead until restart()."""


class WorkerCrashed(WorkerFailure):
    """The worker process died (or broke the protocol). ``stderr_tail`` holds its last stderr."""

    def __init__(self, message: str, stderr_tail: str = "", exit_code: int | None = None):
        full = message if not stderr_tail else f"{message}\n--- worker stderr (tail) ---\n{stderr_tail}"
        super().__init__(full)
        self.stderr_tail = stderr_tail
        self.exit_code = exit_code


# --------------------------------------------------------------------------------------------------
# helpers shared by backends


def normalize_relpath(path: str) -> str:
    """Validate a path given to put_files: relative, no '..' escape. Returns the normalised form."""
    if not path or path.startswith("/") or "\x00" in path:
        raise SandboxError(f"sandbox paths must be relative to the work dir: {path!r}")
    norm = posixpath.normpath(path)
    if norm == "." or norm == ".." or norm.startswith("../"):
        raise SandboxError(f"path escapes the sandbox work dir: {path!r}")
    return norm


def check_argv(argv: object) -> list[str]:
    """exec takes an argv list (never a shell string: no quoting bugs, no injection)."""
    if not isinstance(argv, (list, tuple)) or not argv or not all(isinstance(a, str) for a in argv):
        raise SandboxError(f"argv must be a non-empty list of strings, got {argv!r}")
    return list(argv)


def as_bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class OutputCapture:
    """Collects one output stream up to a cap; remembers whether anything was dropped."""

    __slots__ = ("cap", "chunks", "size", "truncated")

    def __init__(self, cap: int):
        self.cap = cap
        self.chunks: list[bytes] = []
        self.size = 0
        self.truncated = False

    def feed(self, data: bytes) -> bool:
        """Add data; returns True once the cap has been exceeded."""
        room = self.cap - self.size
        if len(data) > room:
            if room > 0:
                self.chunks.append(data[:room])
                self.size += room
            self.truncated = True
        else:
            self.chunks.append(data)
            self.size += len(data)
        return self.truncated

    def text(self) -> str:
        return decode(b"".join(self.chunks))


def signal_reason(returncode: int | None) -> str | None:
    """'signal:SIGKILL' for a negative Popen return code, else None."""
    if returncode is None or returncode >= 0:
        return None
    import signal

    try:
        return f"signal:{signal.Signals(-returncode).name}"
    except ValueError:
        return f"signal:{-returncode}"


# --------------------------------------------------------------------------------------------------
# the interface


class Sandbox(abc.ABC):
    """An isolated place to run untrusted Python: a private work dir, exec, and persistent workers.

    Use as a context manager. ``close()`` kills every process the sandbox started and removes its
    work dir, so nothing outlives it.
    """

    backend: ClassVar[str] = "abstract"
    #: True only for the unsandboxed backend, so reports can say that isolation was off.
    unsafe: bool = False

    def __init__(self, limits: SandboxLimits | None = None):
        self.limits = limits or SandboxLimits()
        self.selection_reason: str = f"backend {self.backend!r} requested explicitly"
        self._workers: list[Worker] = []
        self._opened = False
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def open(self) -> None:
        """Create the work dir and whatever the backend needs (container, remote VM...)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Kill everything this sandbox started and remove its work dir. Idempotent."""

    def __enter__(self) -> "Sandbox":
        if not self._opened:
            self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("sandbox is closed")
        if not self._opened:
            raise SandboxError("sandbox is not open: call open() or use it as a context manager")

    # -- files and commands ------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def workdir(self) -> str:
        """The work dir as seen by code inside the sandbox (also its cwd and HOME)."""

    @abc.abstractmethod
    def put_files(self, files: dict[str, bytes | str]) -> None:
        """Write files into the work dir; paths are relative to it, parents are created."""

    @abc.abstractmethod
    def exec(
        self,
        argv: list[str],
        timeout_s: float | None = None,
        output_cap: int | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run argv in the work dir and wait. Never raises for what the command does: a timeout,
        an output flood or a crash are reported in the result. When it returns, no process the
        command started is still running."""

    # -- workers -------------------------------------------------------------------------------------
    def start_worker(
        self, handler: str, startup_timeout_s: float | None = None, hash_seed: int | None = None
    ) -> "Worker":
        """Start ``python -m sandbox.worker <handler>`` inside the sandbox and wait until it is ready.

        ``hash_seed`` fixes the worker interpreter's ``PYTHONHASHSEED`` (string hashing, and so set
        iteration order), so a check can compare two workers that hash differently.
        """
        self._check_open()
        argv = self.worker_argv(handler, hash_seed)
        worker = Worker(
            lambda: self._spawn_worker(argv),
            name=f"{self.backend}:{handler}",
            startup_timeout_s=startup_timeout_s or self.limits.wall_timeout_s,
        )
        worker.start()
        self._workers.append(worker)
        return worker

    def worker_argv(self, handler: str, hash_seed: int | None = None) -> list[str]:
        argv = ["python", "-m", "sandbox.worker", handler]
        return argv if hash_seed is None else [*argv, "--hash-seed", str(int(hash_seed))]

    @abc.abstractmethod
    def _spawn_worker(self, argv: list[str]) -> "Channel":
        """Start the worker process (``argv`` from :meth:`worker_argv`); return a channel wired to its stdio."""

    def _close_workers(self) -> None:
        for w in self._workers:
            try:
                w.close()
            except Exception:
                pass
        self._workers.clear()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} backend={self.backend} workdir={self.workdir!r}>"


# --------------------------------------------------------------------------------------------------
# worker (host side)


class Channel(abc.ABC):
    """A running worker process as the host sees it: write bytes to its stdin, get its output via
    the callbacks, kill it. Each backend provides one; :class:`Worker` holds the protocol."""

    def __init__(self) -> None:
        self.on_stdout: Callable[[bytes], None] = lambda b: None
        self.on_stderr: Callable[[bytes], None] = lambda b: None
        self.on_eof: Callable[[], None] = lambda: None

    @abc.abstractmethod
    def start(self) -> None:
        """Begin delivering output to the callbacks (call after setting them)."""

    @abc.abstractmethod
    def write(self, data: bytes) -> None: ...

    @abc.abstractmethod
    def kill(self) -> None:
        """Kill the worker and everything it started. Must not block on the output reader."""

    @abc.abstractmethod
    def exit_code(self, wait_s: float = 0.0) -> int | None: ...


_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
_STDERR_TAIL_BYTES = 16 * 1024


class Worker:
    """A persistent process in the sandbox speaking JSON lines.

    Request ``{"id", "method", "params"}``, response ``{"id", "result"}`` or
    ``{"id", "error": {"type", "message", "traceback"}}``. One call at a time per worker (calls
    from several threads are serialised). A timeout kills the worker: a method that ran away may
    hold state we cannot trust, so the caller decides whether to :meth:`restart`.
    """

    def __init__(self, spawn: Callable[[], Channel], name: str = "worker", startup_timeout_s: float = 60):
        self._spawn = spawn
        self.name = name
        self.startup_timeout_s = startup_timeout_s
        self._ids = itertools.count(1)
        self._call_lock = threading.Lock()
        self._channel: Channel | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr_tail: collections.deque[bytes] = collections.deque()
        self._stderr_size = 0
        self._dead_reason: str | None = "not started"
        self.info: dict[str, Any] = {}

    # -- channel callbacks (reader thread) ---------------------------------------------------------
    def _callbacks(self, lines: "queue.Queue[bytes | None]") -> tuple[Callable[[bytes], None], Callable[[bytes], None], Callable[[], None]]:
        """Callbacks bound to one process generation: output of a killed predecessor that arrives
        late (e.g. its EOF) must not land in the queue of the restarted worker."""
        partial = bytearray()

        def on_stdout(data: bytes) -> None:
            partial.extend(data)
            while True:
                nl = partial.find(b"\n")
                if nl < 0:
                    break
                lines.put(bytes(partial[:nl]))
                del partial[: nl + 1]
            if len(partial) > _MAX_MESSAGE_BYTES:
                partial.clear()
                lines.put(b'{"id": null, "__oversize__": true}')

        def on_stderr(data: bytes) -> None:
            if lines is not self._lines:
                return
            self._stderr_tail.append(data)
            self._stderr_size += len(data)
            while self._stderr_size > _STDERR_TAIL_BYTES and len(self._stderr_tail) > 1:
                self._stderr_size -= len(self._stderr_tail.popleft())

        def on_eof() -> None:
            lines.put(None)

        return on_stdout, on_stderr, on_eof

    def stderr_tail(self) -> str:
        return decode(b"".join(self._stderr_tail))[-_STDERR_TAIL_BYTES:]

    # -- lifecycle -----------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._dead_reason is None

    def start(self) -> None:
        """Spawn the process and wait for its ready line (handler imported)."""
        self._lines = queue.Queue()
        self._stderr_tail.clear()
        self._stderr_size = 0
        ch = self._spawn()
        ch.on_stdout, ch.on_stderr, ch.on_eof = self._callbacks(self._lines)
        self._channel = ch
        ch.start()
        self._dead_reason = None
        msg = self._read_message(time.monotonic() + self.startup_timeout_s, what="start")
        if msg.get("event") != "ready":
            err = msg.get("error") or {}
            self._kill("failed to start")
            raise WorkerCrashed(
                f"worker {self.name} failed to start: {err.get('type', '?')}: {err.get('message', msg)}",
                self.stderr_tail(),
            )
        self.info = msg

    def restart(self) -> None:
        """Kill the current process (if any) and start a fresh one with the same handler."""
        self._kill("restarting")
        self.start()

    def close(self) -> None:
        """Kill the worker. Idempotent."""
        self._kill("closed")

    def _kill(self, reason: str) -> None:
        if self._channel is not None:
            try:
                self._channel.kill()
            except Exception:
                pass
        if self._dead_reason is None:
            self._dead_reason = reason

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- rpc -------------------------------------------------------------------------------------------
    def _read_message(self, deadline: float, what: str) -> dict[str, Any]:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill("timed out")
                raise WorkerTimeout(f"worker {self.name}: {what} did not answer in time; the worker was killed")
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self._dead_reason = "exited"
                code = self._channel.exit_code(wait_s=2.0) if self._channel else None
                self._kill("exited")
                raise WorkerCrashed(
                    f"worker {self.name} died during {what} (exit code {code})", self.stderr_tail(), code
                )
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                self._kill("protocol error")
                raise WorkerCrashed(
                    f"worker {self.name} wrote a non-JSON line: {decode(line[:200])!r}", self.stderr_tail()
                ) from None
            if not isinstance(msg, dict):
                continue
            if msg.get("__oversize__"):
                self._kill("protocol error")
                raise WorkerCrashed(f"worker {self.name} sent a message over {_MAX_MESSAGE_BYTES} bytes")
            return msg

    def call(self, method: str, params: dict | None = None, timeout_s: float = 30) -> Any:
        """Call ``method(params)`` in the worker and return its result.

        Raises WorkerError (the method raised), WorkerTimeout (no answer within timeout_s: the
        worker is killed), WorkerCrashed (the process died or is dead).
        """
        with self._call_lock:
            if self._dead_reason is not None:
                raise WorkerCrashed(f"worker {self.name} is not running ({self._dead_reason})", self.stderr_tail())
            req_id = next(self._ids)
            line = json.dumps({"id": req_id, "method": method, "params": params or {}}, default=str) + "\n"
            deadline = time.monotonic() + timeout_s
            try:
                assert self._channel is not None
                self._channel.write(line.encode("utf-8"))
            except (OSError, ValueError) as e:
                code = self._channel.exit_code(wait_s=1.0) if self._channel else None
                self._kill("exited")
                raise WorkerCrashed(f"worker {self.name}: cannot send request ({e})", self.stderr_tail(), code) from None
            while True:
                msg = self._read_message(deadline, what=f"call {method!r}")
                if msg.get("id") != req_id:
                    if msg.get("id") is None and "error" in msg:
                        err = msg["error"]
                        raise WorkerError(err.get("type", "Error"), err.get("message", ""), err.get("traceback"))
                    continue  # a stale or unsolicited line: skip it
                if "error" in msg:
                    err = msg["error"] or {}
                    raise WorkerError(
                        str(err.get("type", "Error")), str(err.get("message", "")), err.get("traceback")
                    )
                return msg.get("result")


def host_env_allowlist(workdir: str, pythonpath: str, path: str) -> dict[str, str]:
    """The whole environment a sandboxed process gets: nothing is inherited from the host."""
    return {
        "PATH": path,
        "HOME": workdir,
        "PYTHONPATH": pythonpath,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def default_timeout(limits: SandboxLimits, timeout_s: float | None) -> float:
    return float(limits.wall_timeout_s if timeout_s is None else timeout_s)


def default_cap(limits: SandboxLimits, cap: int | None) -> int:
    return int(limits.output_cap_bytes if cap is None else cap)
