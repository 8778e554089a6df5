"""Inside the sandbox: one env process on two private pipes, as the trusted shim (:mod:`sandbox.shim`) sees it.

A request under a fresh random id; exactly one reply, a line that begins ``{"id":<that id>,``; then a
``{"sync":S}`` the process must echo as its next line, so a reply env code wrote on the pipe itself shows up as
a second line (:class:`ProtocolViolation`). A one-call process may, before its reply, ask for episodes of its
own and one-shot calls (``{"sub": ...}`` lines), which the shim answers on its stdin (:meth:`EnvProcess.call`'s ``sub``).
Stdlib only.
"""

from __future__ import annotations

import _json
import json.decoder
import os
from typing import Any

#: The longest line the env process may send: the worker's reply cap plus room for the envelope.
MAX_LINE = 32 * 1024 * 1024 + 64 * 1024

_read, _write = os.read, os.write
_encoder = _json.make_encoder(None, None, _json.encode_basestring_ascii, None, ":", ",", False, False, True)
_scan = _json.make_scanner(json.decoder.JSONDecoder())


def _encode(obj: object) -> bytes:
    return "".join(_encoder(obj, 0)).encode("ascii")


def _fresh_id() -> int:
    return int.from_bytes(os.urandom(8), "big") >> 2


class LineTooLong(Exception):
    """The env process sent a line over :data:`MAX_LINE` bytes."""


class Lines:
    """Newline-separated lines read from one fd, in time linear in their size; ``None`` at end of file."""

    def __init__(self, fd: int, max_line: int = MAX_LINE) -> None:
        self.fd, self.max_line = fd, max_line
        self.buf = bytearray()
        self.scanned = 0  # bytes of buf already searched for a newline

    def next(self) -> bytes | None:
        while True:
            nl = self.buf.find(b"\n", self.scanned)
            if nl >= 0:
                line = bytes(self.buf[:nl])
                del self.buf[:nl + 1]
                self.scanned = 0
                return line
            self.scanned = len(self.buf)
            if self.scanned > self.max_line:
                raise LineTooLong(f"a line over {self.max_line} bytes")
            chunk = _read(self.fd, max(1 << 16, min(len(self.buf), 1 << 22)))
            if not chunk:
                return None
            self.buf += chunk


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[_write(fd, view):]


class ProtocolViolation(Exception):
    """The env process broke the protocol: the message says how, for the host's crash report."""


#: Calls that belong to the running episode: they go to its process. A ``reset`` starts a new one.
EPISODE_CALLS = frozenset({"step", "truncate"})
#: What the gate's probes may ask of an episode process of their own (``{"sub": ...}``, see sandbox.worker).
SUB_CALLS = frozenset({"reset", "step", "truncate", "record"})
#: What they may ask of a one-shot process (a fresh one per call, ended after its reply): every other env method
#: they need, so the probe process runs no env code (trace_env.gate_remote).
ONE_SHOT_CALLS = frozenset({"env_generate", "env_seed", "env_solution", "env_initial_state", "env_derive_truth",
                            "env_derive_truths", "env_describe", "env_truth_marks"})


class EnvProcess:
    """One env process on two pipes: the request, one reply (then a sync), and nothing else."""

    def __init__(self, pid: int | None, to_env: int, from_env: int) -> None:
        self.pid, self.to_env, self.from_env_fd = pid, to_env, from_env
        self.env = Lines(from_env)
        self.status: int | None = None  # its wait status, once reaped
        self.starting = pid is None  # a new process: its ready line (with its pid) comes before the first reply

    def line(self) -> bytes | None:
        try:
            return self.env.next()
        except LineTooLong as exc:
            raise ProtocolViolation(f"the env process sent {exc}") from None

    def call(self, method: Any, params: Any, sub: Any = None) -> bytes | None:
        """One request; the rest of its reply after the id, or None if it died. ``sub(line)`` answers the
        sub-calls this process may make while it works (None: it may make none)."""
        call_id = _fresh_id()
        line = _encode({"id": call_id, "method": method, "params": params})
        try:
            _send(self.to_env, line + b"\n")
        except OSError:  # BrokenPipeError: it is gone
            return None
        prefix = b'{"id":%d,' % call_id
        if self.starting and not self.ready():
            return None
        while True:
            reply = self.line()
            if reply is None:
                return None
            if sub is None or not reply.startswith(b'{"sub":'):
                break
            answer = sub(reply)
            if answer is None:  # the episode process it asked for died: this call ends as that process did
                return None
            try:
                _send(self.to_env, b"{" + answer + b"\n")
            except OSError:
                return None
        if not reply.startswith(prefix):
            raise ProtocolViolation("the env process wrote a line that is not the reply to the request it was given "
                                    "(env code wrote on the protocol pipe itself)")
        sync = b'{"sync":%d}' % _fresh_id()
        try:
            _send(self.to_env, sync + b"\n")
        except OSError:
            raise ProtocolViolation("the env process went away right after its reply") from None
        echo = self.line()
        if echo != sync:
            what = "went away right after its reply" if echo is None else "sent a second line after its reply"
            raise ProtocolViolation(f"the env process {what} (env code wrote on the protocol pipe itself)")
        return reply[len(prefix):]

    def ready(self) -> bool:
        """Read a new process's ready line (written before it reads its first request); False if it died."""
        line = self.line()
        if line is None:
            return False
        try:
            info, _ = _scan(line.decode("utf-8", "replace"), 0)
        except (ValueError, StopIteration):
            info = None
        if not isinstance(info, dict) or info.get("event") != "ready" or type(info.get("pid")) is not int:
            raise ProtocolViolation("a new env process did not start")
        self.pid, self.starting = info["pid"], False
        return True

    def close(self) -> None:
        for fd in (self.to_env, self.from_env_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def _rest_error(kind: str, message: str) -> bytes:
    """A reply's rest (after ``{"id":N,``) that is an error."""
    return b'"error":' + _encode({"type": kind, "message": message, "traceback": ""}) + b"}"
