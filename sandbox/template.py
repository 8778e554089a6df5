"""The template process: every env process is forked from it, fresh. Runs INSIDE the sandbox (stdlib only).

No state may cross an episode, whatever its spelling: attributes of shared objects (an SDK dataclass ``Field``,
a stdlib function), process-wide registries (``numbers.Number.register``, ``typing``'s caches), ``os.environ``,
threads, files. Re-executing the env module cannot reach those; a new process can. So the shim keeps one
clean process, forked from itself when the worker starts, that imports the handler (and with it the SDK,
engine and kits), takes the integrity snapshot and, at ``load``, compiles the env source and imports the kits
it names (:func:`trace_env.handler.prepare`) - and never executes a line of env code. Every episode (each
``reset``) and every other call runs in a process forked from it, and so does each env method a probe call asks
of a one-shot process (``sandbox.relay.ONE_SHOT_CALLS``, so the probe's own process runs no env code): a copy of a process that has run no env
code, with the environment and the memory it had before the first episode. The shim empties the writable
places (``/tmp``, ``/dev/shm``, what env code added to the work dir) before each new process, kills what an
earlier one left running, and ends each process when its episode or call is over.

The fork point is the same for every process (this module's loop, which keeps nothing between forks), so the
frames above the handler in an env process are the same whatever asked for it, gate or training.

The shim talks to the template over a private socket pair: ``P`` + a length-prefixed JSON ``load`` request
(answered with the handler's ``prepare`` result or its error), and ``F`` with two pipe fds (``SCM_RIGHTS``):
fork a process on them (it sends the worker's ready line on its pipe); ``W`` + a pid: that process's exit
status, which the shim asks for when its pipe closed during a call; ``U``: the CPU seconds of the template and the
processes it collected (the worker's ``usage``). The template collects the others at each
fork and keeps nothing of them.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import stat
import struct
import sys
from typing import Any

_HEADER = struct.Struct(">Q")
_FORK, _PREPARE, _STATUS, _USAGE = b"F", b"P", b"W", b"U"


class TemplateDied(Exception):
    """The template process is gone: the worker cannot start env processes any more."""


# --- the shim's side --------------------------------------------------------------------------------------


class Template:
    """The shim's handle on its template process (forked here, from the shim, before any request)."""

    def __init__(self, handler: str, checked: bool, close_above: int) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        shim = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:
            code = 1
            try:
                code = _template_main(theirs, handler, checked, shim, close_above)
            finally:
                os._exit(code)
        theirs.close()
        self.ready = self._message()

    def _message(self) -> dict[str, Any]:
        size = _HEADER.unpack(self._exactly(_HEADER.size))[0]
        return json.loads(self._exactly(size))

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise TemplateDied("the template process exited")
            data += chunk
        return data

    def prepare(self, params: dict[str, Any]) -> dict[str, Any]:
        """The handler's ``prepare`` run in the template: ``{"result": ...}`` or ``{"error": {...}}``."""
        body = json.dumps(params).encode()
        try:
            self.sock.sendall(_PREPARE + _HEADER.pack(len(body)) + body)
        except OSError:
            raise TemplateDied("the template process exited") from None
        return self._message()

    def fork(self, request_r: int, reply_w: int) -> None:
        """Fork an env process reading requests on ``request_r`` and replying on ``reply_w``."""
        try:
            socket.send_fds(self.sock, [_FORK], [request_r, reply_w])
        except OSError:
            raise TemplateDied("the template process exited") from None

    def cpu_s(self) -> float:
        """CPU seconds of the template and of every env process it collected (they are its children, not the
        shim's: the shim's own rusage never sees them)."""
        try:
            self.sock.sendall(_USAGE)
        except OSError:
            raise TemplateDied("the template process exited") from None
        return float(self._message().get("cpu_s") or 0.0)

    def status(self, pid: int, wait: bool) -> int | None:
        """The wait status of env process ``pid`` once it exited (None: it runs on, unless ``wait``)."""
        try:
            self.sock.sendall(_STATUS + _HEADER.pack(pid) + (b"1" if wait else b"0"))
        except OSError:
            raise TemplateDied("the template process exited") from None
        return self._message().get("status")


def wipe(directory: str, keep: frozenset[str] = frozenset()) -> None:
    """Remove everything in ``directory`` but the names in ``keep`` (what env code wrote there), making
    unreadable folders readable first; what cannot be removed is left."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name not in keep:
            _remove(os.path.join(directory, name))


def _remove(path: str) -> None:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if stat.S_ISDIR(mode):
        try:
            os.chmod(path, 0o700)
        except OSError:
            pass
        wipe(path)
        try:
            os.rmdir(path)
        except OSError:
            pass
        return
    try:
        os.unlink(path)
    except OSError:
        pass


def children() -> list[int]:
    """Pids of this process's children (``/proc/self/task/<pid>/children``; [] where the kernel has none)."""
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as handle:
            return [int(p) for p in handle.read().split()]
    except (OSError, ValueError):
        return []


# --- the template process -----------------------------------------------------------------------------------


def _send(sock: socket.socket, obj: dict[str, Any]) -> None:
    body = json.dumps(obj).encode()
    sock.sendall(_HEADER.pack(len(body)) + body)


def _exactly(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _template_main(sock: socket.socket, handler: str, checked: bool, shim: int, close_above: int) -> int:
    """Import the handler, take the integrity snapshot, then serve the shim's requests until it goes away."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # the host channel's fds are the shim's alone
    os.dup2(sock.fileno(), 3)
    sock.detach()
    sock = socket.socket(fileno=3)
    os.closerange(4, close_above)
    from sandbox import worker
    from sandbox.integrity import Snapshot

    worker._prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: no template outlives its shim
    if os.getppid() != shim:
        return 1
    sys.stdout = sys.stderr
    try:
        methods = worker.load_handler(handler)
    except BaseException as exc:  # noqa: BLE001 - reported to the host as the worker's start error
        _send(sock, {"error": worker._error(exc)})
        return 1
    module = sys.modules[handler]
    snapshot = Snapshot() if checked else None
    info = {"handler": handler, "integrity_checked": checked, "fresh_processes": True}
    _send(sock, {"event": "ready", "methods": sorted(methods), **info})
    gc.freeze()  # what is here now is never traversed by a child's collector: its pages stay shared
    while True:
        op, fds, _, _ = socket.recv_fds(sock, 1, 2)
        if not op:
            return 0
        if op == _PREPARE:
            header = _exactly(sock, _HEADER.size)
            body = None if header is None else _exactly(sock, _HEADER.unpack(header)[0])
            if body is None:
                return 0
            try:
                answer: dict[str, Any] = {"result": module.prepare(json.loads(body))}
            except BaseException as exc:  # noqa: BLE001 - the source does not compile: the host hears why
                answer = {"error": worker._error(exc)}
            del body
            if checked:
                snapshot = Snapshot()  # the kits it imported are covered from the first env process on
            gc.collect()
            gc.freeze()
            _send(sock, answer)
        elif op == _FORK and len(fds) == 2:
            _collect()
            if os.fork() == 0:
                _env_process(fds[0], fds[1], sock, methods, snapshot, checked, close_above, info)
            os.close(fds[0])
            os.close(fds[1])
        elif op == _USAGE:
            _collect()
            _send(sock, {"cpu_s": _cpu_s()})
        elif op == _STATUS:
            asked = _exactly(sock, _HEADER.size + 1)
            if asked is None:
                return 0
            _send(sock, {"status": _status(_HEADER.unpack(asked[:-1])[0], asked[-1:] == b"1")})
        else:
            for fd in fds:
                os.close(fd)


def _collect() -> None:
    """Collect env processes that exited (the shim ended them), keeping nothing of them."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _cpu_s() -> float:
    import resource

    own, done = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + done.ru_utime + done.ru_stime


def _status(pid: int, wait: bool) -> int | None:
    """Wait status of a child of this process that exited (asked by the shim when its pipe closed)."""
    try:
        done, status = os.waitpid(pid, 0 if wait else os.WNOHANG)
    except ChildProcessError:
        return None
    return status if done == pid else None


def _env_process(request_r: int, reply_w: int, sock: socket.socket, methods: dict[str, Any], snapshot: Any,
                 checked: bool, close_above: int, info: dict[str, Any]) -> None:
    """One env process: the worker's request loop on the two pipes, with the template's snapshot."""
    code = 1
    try:
        template = os.getppid()
        sock.close()
        os.dup2(request_r, 0)
        os.dup2(reply_w, 1)
        os.closerange(3, close_above)
        from sandbox import worker

        worker._prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: dies with the template (which dies with the shim)
        if os.getppid() != template:
            os._exit(1)
        if snapshot is not None:
            snapshot.rebase()
        proto = os.dup(1)
        os.dup2(2, 1)
        handler = sys.modules.get(info["handler"])
        attach = getattr(handler, "attach_episodes", None)
        if attach is not None:
            attach(worker.subcall)
        worker.serve(methods, worker._lines(0), proto, info, checked=checked, snapshot=snapshot)
        code = 0
    finally:
        os._exit(code)
