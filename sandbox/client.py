"""Host side of the JSON-lines worker protocol: a :class:`Channel` per backend, one :class:`Worker` for all.

The worker runs untrusted env code, so everything it sends is hostile until checked: lines are split in
linear time with a size cap, parsed by :mod:`sandbox.replies` (bounded depth, encodable strings, only
:class:`BadReply` on garbage), and output nobody asked for (stderr, stray protocol lines) has a byte budget
per call, past which the worker is killed. Request ids are random, so a line written ahead of time cannot
pass for the answer to a call.
"""

from __future__ import annotations

import abc
import collections
import json
import queue
import secrets
import threading
import time
from typing import Any, Callable, Union

from sandbox.errors import RequestNotEncodable, WorkerCrashed, WorkerError, WorkerTimeout, decode
from sandbox.replies import MAX_MESSAGE_BYTES, BadReply, LineSplitter, parse_message, printable

_STDERR_TAIL_BYTES = 16 * 1024
_ERROR_FIELD_CHARS = {"type": 200, "message": 4000, "traceback": 8000}


class Channel(abc.ABC):
    """A running worker process as the host sees it: write bytes to its stdin, get its output via
    the callbacks, kill it. Each backend provides one; :class:`Worker` holds the protocol."""

    #: The caller's thread reads the output (:meth:`pump`) instead of reader threads: one thread wake-up less
    #: per call, which is most of a call's cost next to a step of a few tens of microseconds.
    pumped_by_caller: bool = False

    def __init__(self) -> None:
        self.on_stdout: Callable[[bytes], None] = lambda b: None
        self.on_stderr: Callable[[bytes], None] = lambda b: None
        self.on_eof: Callable[[], None] = lambda: None

    @abc.abstractmethod
    def start(self) -> None:
        """Begin delivering output to the callbacks (call after setting them)."""

    def pump(self, timeout_s: float) -> None:
        """Where :attr:`pumped_by_caller`: wait up to ``timeout_s`` for output and hand what came to the callbacks."""
        raise NotImplementedError

    @abc.abstractmethod
    def write(self, data: bytes) -> None: ...

    @abc.abstractmethod
    def kill(self) -> None:
        """Kill the worker and everything it started. Must not block on the output reader."""

    @abc.abstractmethod
    def exit_code(self, wait_s: float = 0.0) -> int | None: ...


class _Event(str):
    """A marker the reader thread puts in the line queue (never a bytes line)."""


EOF, OVERSIZE, OVER_BUDGET = _Event("eof"), _Event("oversize"), _Event("over budget")
_Item = Union[bytes, _Event]


class Worker:
    """A persistent process in the sandbox speaking JSON lines.

    Request ``{"id", "method", "params"}``, response ``{"id", "result"}`` or
    ``{"id", "error": {"type", "message", "traceback"}}``. One call at a time per worker (calls
    from several threads are serialised). A timeout kills the worker: a method that ran away may
    hold state we cannot trust, so the caller decides whether to :meth:`restart`.
    """

    def __init__(
        self,
        spawn: Callable[[], Channel],
        name: str = "worker",
        startup_timeout_s: float = 60,
        max_reply_bytes: int = MAX_MESSAGE_BYTES,
        unsolicited_budget: int = 1024 * 1024,
    ):
        self._spawn = spawn
        self.name = name
        self.startup_timeout_s = startup_timeout_s
        self.max_reply_bytes = max_reply_bytes
        self.unsolicited_budget = unsolicited_budget
        self._call_lock = threading.Lock()
        self._channel: Channel | None = None
        self._lines: queue.Queue[_Item] = queue.Queue()
        self._stderr_tail: collections.deque[bytes] = collections.deque()
        self._stderr_size = 0
        self._noise = 0  # unsolicited bytes in the current call window
        self._queued = 0  # bytes of lines queued and not yet read
        self._dead_reason: str | None = "not started"
        self.info: dict[str, Any] = {}

    @property
    def in_call(self) -> bool:
        """A request is out and its reply not yet read: the time the env spends now is the call's (a host-side
        clock counts only this time against the env, not the caller's own time between calls)."""
        return self._call_lock.locked()

    # -- channel callbacks (reader thread) ---------------------------------------------------------
    def _callbacks(self, lines: "queue.Queue[_Item]") -> tuple[Callable[[bytes], None], Callable[[bytes], None], Callable[[], None]]:
        """Callbacks bound to one process generation: output of a killed predecessor that arrives
        late (e.g. its EOF) must not land in the queue of the restarted worker."""
        splitter = LineSplitter(self.max_reply_bytes)
        over = [False]

        def over_budget(what: str) -> None:
            if not over[0]:
                over[0] = True
                self._kill(f"killed: wrote more than {self.unsolicited_budget} bytes of {what} nobody asked for")
                lines.put(OVER_BUDGET)

        def on_stdout(data: bytes) -> None:
            if over[0]:
                return
            for line in splitter.feed(data):
                if line is None:
                    lines.put(OVERSIZE)
                    continue
                self._queued += len(line)
                if self._queued > self.max_reply_bytes + self.unsolicited_budget:
                    over_budget("protocol lines")
                    return
                lines.put(line)

        def on_stderr(data: bytes) -> None:
            if lines is not self._lines or over[0]:
                return
            self._stderr_tail.append(data)
            self._stderr_size += len(data)
            while self._stderr_size > _STDERR_TAIL_BYTES and len(self._stderr_tail) > 1:
                self._stderr_size -= len(self._stderr_tail.popleft())
            self._noise += len(data)
            if self._noise > self.unsolicited_budget:
                over_budget("output on stderr")

        def on_eof() -> None:
            lines.put(EOF)

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
        self._stderr_size = self._noise = self._queued = 0
        ch = self._spawn()
        ch.on_stdout, ch.on_stderr, ch.on_eof = self._callbacks(self._lines)
        self._channel = ch
        self._dead_reason = None
        ch.start()
        msg = self._read_message(time.monotonic() + self.startup_timeout_s, what="start")
        if msg.get("event") != "ready":
            err = _error_fields(msg.get("error"))
            self._kill("failed to start")
            raise WorkerCrashed(f"worker {self.name} failed to start: {err['type']}: {err['message']}", self.stderr_tail())
        self.info = msg

    def restart(self) -> None:
        """Kill the current process (if any) and start a fresh one with the same handler."""
        self._kill("restarting")
        self.start()

    def close(self) -> None:
        """Kill the worker. Idempotent."""
        self._kill("closed")

    def _kill(self, reason: str) -> None:
        if self._dead_reason is None:
            self._dead_reason = reason
        if self._channel is not None:
            try:
                self._channel.kill()
            except Exception:  # noqa: BLE001 - already gone
                pass

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- rpc -------------------------------------------------------------------------------------------
    def _crash(self, reason: str, message: str) -> WorkerCrashed:
        code = self._channel.exit_code(wait_s=2.0) if self._channel else None
        self._kill(reason)
        return WorkerCrashed(message, self.stderr_tail(), code)

    def _read_message(self, deadline: float, what: str) -> dict[str, Any]:
        channel = self._channel
        pump = channel.pump if channel is not None and channel.pumped_by_caller else None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill("timed out")
                raise WorkerTimeout(f"worker {self.name}: {what} did not answer in time; the worker was killed")
            try:
                item = self._lines.get_nowait() if pump is not None else self._lines.get(timeout=remaining)
            except queue.Empty:
                if pump is not None:
                    pump(remaining)
                continue
            if item is EOF:
                reason = self._dead_reason if self._dead_reason not in (None, "exited") else None
                code = self._channel.exit_code(wait_s=2.0) if self._channel else None
                self._kill("exited")
                raise WorkerCrashed(f"worker {self.name} died during {what} (exit code {code})"
                                    + (f": {reason}" if reason else ""), self.stderr_tail(), code)
            if item is OVER_BUDGET:
                raise self._crash("output budget", f"worker {self.name} {self._dead_reason or 'was killed'}")
            if item is OVERSIZE:
                raise self._crash("protocol error", f"worker {self.name} sent a message over {self.max_reply_bytes} bytes; the worker was killed")
            assert isinstance(item, bytes)
            self._queued -= len(item)
            if not item.strip():
                continue
            try:
                return parse_message(item)
            except BadReply as exc:
                raise self._crash("protocol error", f"worker {self.name} wrote {exc}; the worker was killed") from None

    def _stray(self, size: int) -> None:
        self._noise += size
        if self._noise > self.unsolicited_budget:
            raise self._crash("output budget", f"worker {self.name} wrote more than {self.unsolicited_budget} bytes "
                              "of protocol lines nobody asked for; the worker was killed")

    def call(self, method: str, params: dict | None = None, timeout_s: float = 30) -> Any:
        """Call ``method(params)`` in the worker and return its result (clean JSON data).

        Raises WorkerError (the method raised), WorkerTimeout (no answer within timeout_s: the
        worker is killed), WorkerCrashed (the process died, broke the protocol or is dead).
        """
        with self._call_lock:
            if self._dead_reason is not None:
                raise WorkerCrashed(f"worker {self.name} is not running ({self._dead_reason})", self.stderr_tail())
            req_id = secrets.randbits(62)
            try:  # the one JSON encoding of a request
                line = json.dumps({"id": req_id, "method": method, "params": params or {}}, default=str) + "\n"
            except (ValueError, RecursionError) as exc:
                cause = type(exc).__name__
                raise RequestNotEncodable(f"call {method!r}: its params cannot be encoded as JSON ({cause})", cause) from None
            deadline = time.monotonic() + timeout_s
            self._noise = 0
            try:
                assert self._channel is not None
                self._channel.write(line.encode("utf-8"))
            except (OSError, ValueError) as e:
                raise self._crash("exited", f"worker {self.name}: cannot send request ({e})") from None
            while True:
                msg = self._read_message(deadline, what=f"call {method!r}")
                msg_id = msg.get("id")
                if msg_id is None and "error" in msg:  # the worker could not read the request
                    err = _error_fields(msg["error"])
                    raise WorkerError(err["type"], err["message"], err["traceback"])
                if msg_id != req_id or not ("result" in msg or "error" in msg):
                    self._stray(len(json.dumps(msg, default=str)))  # stale or unsolicited: skip, within budget
                    continue
                if "error" in msg:
                    err = _error_fields(msg["error"])
                    if isinstance(msg["error"], dict) and msg["error"].get("fatal") is True:
                        raise self._crash("fatal error", f"worker {self.name}: {err['type']}: {err['message']}")
                    raise WorkerError(err["type"], err["message"], err["traceback"])
                return msg["result"]


def _error_fields(err: Any) -> dict[str, str]:
    """The error object of a reply as three bounded strings, whatever shape it came in."""
    err = err if isinstance(err, dict) else {"message": printable(json.dumps(err, default=str), 500)}
    out = {}
    for key, limit in _ERROR_FIELD_CHARS.items():
        value = err.get(key)
        text = value if isinstance(value, str) else ("" if value is None else json.dumps(value, default=str))
        out[key] = text[:limit]
    out["type"] = out["type"] or "Error"
    return out
