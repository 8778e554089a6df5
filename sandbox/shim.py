"""The trusted shim: ``python -m sandbox.shim HANDLER [--unchecked] [--hash-seed N]``. Runs INSIDE the sandbox.

Env code must not be able to answer the host's calls itself, so it never shares a process with the code that
speaks to the host. The shim alone holds the host channel (its stdin and stdout) and runs no env code: it
forks the env process (which runs :func:`sandbox.worker.main` with ``--shimmed PID``) on two private pipes and
relays, for each host request:

- the request, under a fresh random id (the env process never sees the host's ids), one at a time;
- exactly one reply: a line that begins ``{"id":<that id>,``. Then the shim sends ``{"sync":S}`` (S random)
  and the next line must echo it, so a reply env code wrote on the pipe itself shows up as a second line. A
  line for another id, a second line, or the env process dying before the echo ends the worker with a fatal
  ``ProtocolViolation`` (the host reports a crash with that message): a clear failure, never a verdict;
- that reply, under the host's id. What it holds is the env process's answer, which the host validates by
  shape (:mod:`sandbox.replies`, :mod:`schemas.wire`) as it always did.

The env process inherits none of the shim's channel fds: only the two pipes, as its stdin and stdout, and
stderr (which the host reads as budgeted noise, never as protocol). The shim makes itself non-dumpable, so a
process of the same uid cannot open ``/proc/<shim>/fd/*``, read its memory or trace it; under bwrap it is
the sandbox's pid 1 (no other process inside holds the channel, and init ignores kill from inside).

On Docker (as root, local daemon) ``--fifo-dir DIR`` moves the host channel off the attach stream, whose every
byte dockerd and containerd-shim relay: the shim reads a FIFO name on stdin (the attach stream, which only it
reads) and speaks the protocol over ``DIR/<name>.in`` and ``.out`` (:mod:`sandbox.docker_fifo`).

If the env process dies during a call, the shim exits with its status, so the host sees what it saw before
the split: a worker that died during the call, with its exit code and stderr.
"""

from __future__ import annotations

import _json
import json.decoder
import os
import signal
import sys
from typing import Any

#: The longest line the env process may send: the worker's reply cap plus room for the envelope.
MAX_LINE = 32 * 1024 * 1024 + 64 * 1024
#: How long a process that closed its end of the pipe gets to exit before it is killed.
_EXIT_GRACE_S = 2.0
USAGE = "usage: python -m sandbox.shim HANDLER_MODULE [--unchecked] [--fifo-dir DIR] [--hash-seed N]"

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


def _error(req_id: Any, kind: str, message: str, fatal: bool = False) -> bytes:
    err: dict[str, Any] = {"type": kind, "message": message, "traceback": ""}
    if fatal:
        err["fatal"] = True
    return _encode({"id": req_id, "error": err}) + b"\n"


def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        return ctypes.CDLL(None).prctl(option, value, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - not Linux, or no libc: the sandbox still holds, the shim is weaker
        return False


class ProtocolViolation(Exception):
    """The env process broke the protocol: the message says how, for the host's crash report."""


class Shim:
    """The relay between the host channel (``host_in``, ``host_out``) and one env process."""

    def __init__(self, handler: str, checked: bool, host_in: int, host_out: int) -> None:
        self.host, self.host_out = Lines(host_in, max_line=1 << 30), host_out
        req_r, self.to_env = os.pipe()
        self.from_env_fd, rep_w = os.pipe()
        shim = os.getpid()
        # A fork, not a new interpreter: this process imported nothing of env code, holds no secret, and its
        # string hashing is already the one asked for. The child keeps only the two pipes (as 0 and 1) and stderr.
        self.pid = os.fork()
        if self.pid == 0:
            code = 1
            try:
                os.dup2(req_r, 0)
                os.dup2(rep_w, 1)
                os.closerange(3, _max_fd())
                from sandbox import worker

                code = worker.main([handler, *([] if checked else ["--unchecked"]), "--shimmed", str(shim)])
            finally:
                os._exit(code)
        os.close(req_r)
        os.close(rep_w)
        self.env = Lines(self.from_env_fd)
        self.status: int | None = None  # the env process's wait status, once reaped

    # -- the env process -------------------------------------------------------------------------------
    def reap(self) -> None:
        """Collect exited children (orphans of env code re-parent here), noting the env process's status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.pid:
                self.status = status

    def exit_code(self) -> int:
        """The env process's exit code (128+N for signal N), waiting a moment for it to finish exiting."""
        deadline = _monotonic() + _EXIT_GRACE_S
        while self.status is None and _monotonic() < deadline:
            self.reap()
            if self.status is None:
                _sleep(0.005)
        if self.status is None:  # it closed the pipe but lives on: it is ended here
            self.kill()
            return 128 + signal.SIGKILL
        if os.WIFSIGNALED(self.status):
            return 128 + os.WTERMSIG(self.status)
        return os.waitstatus_to_exitcode(self.status)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            _, self.status = os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

    def env_line(self) -> bytes | None:
        try:
            return self.env.next()
        except LineTooLong as exc:
            raise ProtocolViolation(f"the env process sent {exc}") from None

    # -- start and relay -------------------------------------------------------------------------------
    def start(self) -> int | None:
        """Relay the env process's ready line (with the shim's facts added); an exit code if it failed."""
        line = self.env_line()
        if line is None:
            code = self.exit_code()
            _send(self.host_out, _error(None, "EnvProcessDied", f"the env process exited (code {code}) before it was ready"))
            return 1
        try:
            ready, _ = _scan(line.decode("utf-8", "replace"), 0)
        except (ValueError, StopIteration):
            ready = None
        if not isinstance(ready, dict) or ready.get("event") != "ready":
            err = ready.get("error") if isinstance(ready, dict) else None
            _send(self.host_out, _encode({"id": None, "error": err if isinstance(err, dict) else {
                "type": "EnvProcessFailed", "message": "the env process did not start", "traceback": ""}}) + b"\n")
            return 1
        ready.update(pid=os.getpid(), env_pid=self.pid, shim=True)
        _send(self.host_out, _encode(ready) + b"\n")
        return None

    def serve(self) -> int:
        """Relay host requests until the host closes the channel; the exit code of the shim."""
        while True:
            raw = self.host.next()
            if raw is None:
                return 0
            if not raw.strip():
                continue
            try:
                host_id, request = self._request(raw)
            except ValueError as exc:
                _send(self.host_out, _error(None, "BadRequest", str(exc)))
                continue
            try:
                reply = self._call(request)
            except ProtocolViolation as exc:
                _send(self.host_out, _error(host_id, "ProtocolViolation", str(exc), fatal=True))
                return 3
            if reply is None:  # the env process died during the call: exit as it did
                return self.exit_code()
            _send(self.host_out, b'{"id":' + _encode(host_id) + b"," + reply + b"\n")
            self.reap()

    @staticmethod
    def _request(raw: bytes) -> tuple[Any, dict[str, Any]]:
        try:
            req, end = _scan(raw.decode("utf-8"), 0)
        except (ValueError, StopIteration, UnicodeDecodeError):
            raise ValueError("a request line that is not JSON") from None
        if type(req) is not dict or type(req.get("id")) not in (int, str):
            raise ValueError("a request must be a JSON object with an integer or string id")
        return req["id"], req

    def _call(self, request: dict[str, Any]) -> bytes | None:
        """One request to the env process; the rest of its reply after the id, or None if it died."""
        call_id = _fresh_id()
        line = _encode({"id": call_id, "method": request.get("method"), "params": request.get("params", {})})
        try:
            _send(self.to_env, line + b"\n")
        except OSError:  # BrokenPipeError: it is gone
            return None
        reply = self.env_line()
        if reply is None:
            return None
        prefix = b'{"id":%d,' % call_id
        if not reply.startswith(prefix):
            raise ProtocolViolation("the env process wrote a line that is not the reply to the request it was given "
                                    "(env code wrote on the protocol pipe itself)")
        sync = b'{"sync":%d}' % _fresh_id()
        try:
            _send(self.to_env, sync + b"\n")
        except OSError:
            raise ProtocolViolation("the env process went away right after its reply") from None
        echo = self.env_line()
        if echo != sync:
            what = "went away right after its reply" if echo is None else "sent a second line after its reply"
            raise ProtocolViolation(f"the env process {what} (env code wrote on the protocol pipe itself)")
        return reply[len(prefix):]


def _max_fd() -> int:
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if 0 < soft < 1 << 20 else 1 << 16


def _monotonic() -> float:
    import time

    return time.monotonic()


def _sleep(seconds: float) -> None:
    import time

    time.sleep(seconds)


def _open_fifos(directory: str, attach_out: int) -> tuple[int, int]:
    """The request and reply FIFOs whose name the host sent as the first line on stdin (the attach stream,
    which only this process reads); (request fd, reply fd). The attach stdout is let go: stderr stays there."""
    line = Lines(0, max_line=64).next() or b""
    name = line.decode("ascii", "replace").strip()
    if len(name) != 32 or any(c not in "0123456789abcdef" for c in name):
        raise ValueError("the host sent no channel name")
    reply = os.open(f"{directory}/{name}.out", os.O_WRONLY | os.O_CLOEXEC)  # the host holds it open: no wait
    request = os.open(f"{directory}/{name}.in", os.O_RDONLY | os.O_CLOEXEC)
    os.close(attach_out)
    return request, reply


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) >= 2 and args[-2] == "--hash-seed" and args[-1].isdigit():
        # string hashing is fixed when the interpreter starts, and the env process is a fork of this one
        if os.environ.get("PYTHONHASHSEED") != args[-1]:
            os.execve(sys.executable, [sys.executable, "-m", "sandbox.shim", *args],
                      dict(os.environ, PYTHONHASHSEED=args[-1]))
        args = args[:-2]
    checked = "--unchecked" not in args
    args = [a for a in args if a != "--unchecked"]
    fifo_dir = None
    if "--fifo-dir" in args[:-1]:
        at = args.index("--fifo-dir")
        fifo_dir = args[at + 1]
        del args[at:at + 2]
    host_in, host_out = 0, os.dup(1)  # the channel to the host: nothing else in this process may write there
    os.dup2(2, 1)
    if len(args) != 1:
        _send(host_out, _error(None, "UsageError", USAGE))
        return 2
    if fifo_dir is not None:  # Docker: the protocol runs over two FIFOs, past the daemon's relay
        try:
            host_in, host_out = _open_fifos(fifo_dir, host_out)
        except (OSError, ValueError) as exc:
            _send(host_out, _error(None, "ChannelError", f"cannot open the worker's FIFOs: {exc}"))
            return 2
    _prctl(4, 0)  # PR_SET_DUMPABLE 0: no /proc/<shim>/fd, mem or ptrace for the env process (same uid)
    _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans of env code re-parent here, inside the worker's tree
    shim = Shim(args[0], checked, host_in=host_in, host_out=host_out)
    try:
        failed = shim.start()
        return failed if failed is not None else shim.serve()
    finally:
        shim.kill()


if __name__ == "__main__":
    os._exit(main())
