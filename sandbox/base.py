"""The one sandbox interface every backend implements, and the host side of the JSON-lines worker.

Env code written by an LLM is untrusted. Everything that runs it goes through :class:`Sandbox`, so
that the isolation technology (bubblewrap, Docker, E2B, or - explicitly - none) is a deployment
choice rather than something each caller re-implements.
"""

from __future__ import annotations

import abc
import posixpath
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

# --------------------------------------------------------------------------------------------------
# boundary models


class SandboxLimits(BaseModel):
    """Resource limits applied to everything that runs in one sandbox.

    Per-process limits (CPU seconds, address space, file size, open files) are rlimits. ``memory_mb`` (which
    counts tmpfs pages: work dir, /tmp, /dev/shm), ``max_processes`` (threads included) and ``cpu_quota`` hold
    for the whole sandbox: a cgroup on bwrap, the container on Docker; so do the inode caps of its tmpfs
    mounts, and its open files are at most ``open_files * max_processes``. Across all sandboxes of this host,
    :mod:`sandbox.budget` holds tasks and memory in a parent cgroup. Where a host cannot set one, the
    sandbox's ``warning`` says so.
    """

    model_config = ConfigDict(frozen=True)

    cpu_seconds: int = Field(30, ge=1, description="RLIMIT_CPU per process")
    memory_mb: int = Field(1024, ge=16, description="address space per process (bwrap/unsafe), container memory (docker)")
    file_size_mb: int = Field(64, ge=1, description="RLIMIT_FSIZE: largest file a process may write")
    max_processes: int = Field(64, ge=4, description="RLIMIT_NPROC (bwrap, non-root uid) / pids limit (docker)")
    wall_timeout_s: float = Field(60, gt=0, description="default wall-clock limit of one exec")
    output_cap_bytes: int = Field(1_000_000, ge=1024, description="default cap on each of stdout and stderr")
    cpu_quota: float = Field(1.0, gt=0, le=64, description="CPU cores the whole sandbox may use (cgroup / docker quota)")
    workdir_mb: int = Field(256, ge=4, description="size of the work dir (a tmpfs: counted in memory too)")
    workdir_inodes: int = Field(10_000, ge=64, description="files and directories the work dir may hold")
    shm_mb: int = Field(16, ge=1, description="size of /dev/shm (a tmpfs: counted in memory too)")
    tmpfs_inodes: int = Field(10_000, ge=64, description="files and directories /tmp and /dev/shm may each hold")
    open_files: int = Field(256, ge=16, description="RLIMIT_NOFILE per process: with max_processes, the open files "
                            "of the whole sandbox are at most open_files * max_processes")
    reply_max_bytes: int = Field(32 * 1024 * 1024, ge=4096, description="largest reply a worker may send")
    unsolicited_output_bytes: int = Field(
        1024 * 1024, ge=1024,
        description="stderr plus stray protocol lines a worker may write per call before it is killed",
    )


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


from sandbox.errors import (  # noqa: E402  (the errors' own home; every backend imports them from here)
    SandboxError,
    SandboxUnavailable,
    WorkerBadReply,
    WorkerCrashed,
    WorkerError,
    WorkerFailure,
    WorkerTimeout,
    decode,
)


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


def exit_status(rc: int) -> tuple[int | None, str | None]:
    """(exit code, killed reason) of a job whose launcher (bwrap, ``docker exec``) reports death by signal N
    as 128+N: the code stays, the reason names the signal. A negative Popen code means the launcher itself
    was killed: no exit code."""
    if rc < 0:
        return None, signal_reason(rc)
    if 128 < rc < 128 + 65:
        import signal

        try:
            return rc, f"signal:{signal.Signals(rc - 128).name}"
        except ValueError:
            return rc, None
    return rc, None


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
    #: The aggregate limits (cgroup, capped tmpfs work dir and /dev/shm, seccomp, CPU quota) and the
    #: worker's integrity check. Set False ONLY by bench/bench_sandbox.py, to measure what they cost.
    hardened: bool = True
    #: Workers run behind the trusted shim (:mod:`sandbox.shim`), env code in a process of its own. Set False
    #: ONLY by bench/bench_sandbox.py, to measure what the split costs (the worker then holds the channel).
    shimmed: bool = True
    #: Every episode and every other call in a process of its own, forked from a clean template, with the
    #: writable folders emptied before it (:mod:`sandbox.template`). Set False ONLY by the benchmark and the
    #: tests that show what it stops: one env process then serves the worker's life.
    fresh_processes: bool = True

    def __init__(self, limits: SandboxLimits | None = None):
        self.limits = limits or SandboxLimits()
        self.selection_reason: str = f"backend {self.backend!r} requested explicitly"
        #: One line naming the limits this host could not set (None: all of them hold). Reports show it.
        self.warning: str | None = None
        self._workers: list[Worker] = []
        self._opened = False
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def open(self) -> None:
        """Create the work dir and whatever the backend needs (container, remote VM...)."""

    def close(self) -> None:
        """Kill everything this sandbox started and remove its work dir. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._close_workers()
        self._teardown()

    @abc.abstractmethod
    def _teardown(self) -> None:
        """Once, after the workers are closed: kill what is left and remove the work dir and resources."""

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
        """Start ``python -m sandbox.shim <handler>`` inside the sandbox and wait until it is ready: the shim holds
        the channel, and runs the handler (and so env code) in an env process of its own (``sandbox.worker``).

        ``hash_seed`` fixes the worker interpreter's ``PYTHONHASHSEED`` (string hashing, and so set
        iteration order), so a check can compare two workers that hash differently.
        """
        self._check_open()
        argv = self.worker_argv(handler, hash_seed)
        worker = Worker(
            lambda: self._spawn_worker(argv),
            name=f"{self.backend}:{handler}",
            startup_timeout_s=startup_timeout_s or self.limits.wall_timeout_s,
            max_reply_bytes=self.limits.reply_max_bytes,
            unsolicited_budget=self.limits.unsolicited_output_bytes,
        )
        worker.start()
        self._workers.append(worker)
        return worker

    def worker_argv(self, handler: str, hash_seed: int | None = None) -> list[str]:
        argv = ["python", "-m", "sandbox.shim" if self.shimmed else "sandbox.worker", handler]
        if not self.hardened:
            argv.append("--unchecked")
        if self.shimmed and not self.fresh_processes:
            argv.append("--one-process")
        elif self.shimmed and not self.unsafe:
            argv.append("--scratch")
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


# The host side of the worker protocol lives in sandbox.client; re-exported here for the backends.
from sandbox.client import Channel, Worker  # noqa: E402
