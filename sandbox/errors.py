"""What a sandbox or its worker can raise, apart from ``base`` so that ``client`` (the worker protocol's host
side) and ``base`` (which starts workers) both import them without importing each other."""

from __future__ import annotations


class SandboxError(RuntimeError):
    """A sandbox could not do what was asked (setup failed, bad path, closed sandbox...)."""


class SandboxUnavailable(SandboxError):
    """The requested backend cannot run on this machine; the message says how to fix it."""


class RequestNotEncodable(SandboxError, ValueError):
    """A call's params cannot be written as JSON (a cycle, extreme nesting); nothing was sent, the worker is fine.
    ``cause`` names the encoder's exception (ValueError, RecursionError)."""

    def __init__(self, message: str, cause: str):
        super().__init__(message)
        self.cause = cause


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


class WorkerBadReply(WorkerFailure):
    """A worker answered, but with something malformed (wrong shape, non-finite reward...). It stays usable."""


class WorkerCrashed(WorkerFailure):
    """The worker process died (or broke the protocol). ``stderr_tail`` holds its last stderr."""

    def __init__(self, message: str, stderr_tail: str = "", exit_code: int | None = None):
        full = message if not stderr_tail else f"{message}\n--- worker stderr (tail) ---\n{stderr_tail}"
        super().__init__(full)
        self.stderr_tail = stderr_tail
        self.exit_code = exit_code


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
