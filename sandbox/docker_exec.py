"""``docker exec`` over the raw attach socket: one-shot jobs and persistent workers. Host side.

Output is read from the hijacked attach connection by the calling thread (a job) or one reader thread (a
worker), with ``select`` and a deadline, and demultiplexed from Docker's stream framing. Reading never kills:
the caller passes a ``reap`` that ends the container's processes from the host (:mod:`sandbox.docker_procs`),
which also ends the stream.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time
from typing import Any, Callable

from sandbox import runtime
from sandbox.base import Channel, OutputCapture, SandboxError
from sandbox.docker_container import USER

_CHUNK = 1 << 16
_MAX_DRAIN_AFTER_KILL_S = 5.0
_POLL_S = 0.1
_EXIT_GRACE_S = 0.3


class Demux:
    """Splits Docker's multiplexed stream (8-byte headers: stream, 0, 0, 0, size BE32)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self.buf += data
        out = []
        while len(self.buf) >= 8:
            stream, size = self.buf[0], struct.unpack(">I", self.buf[4:8])[0]
            if len(self.buf) < 8 + size:
                break
            out.append((stream, bytes(self.buf[8:8 + size])))
            del self.buf[:8 + size]
        return out


def create(client: Any, container_id: str, argv: list[str], *, stdin: bool, env: dict[str, str], user: str = USER) -> str:
    """Create (not start) an exec of argv as the sandbox user (``uid:gid``, the sandbox's own) in the work dir;
    returns its id."""
    return client.api.exec_create(
        container_id, argv, stdout=True, stderr=True, stdin=stdin, tty=False,
        user=user, workdir=runtime.INSIDE_WORK, environment=env,
    )["Id"]


def start_socket(client: Any, exec_id: str) -> tuple[socket.socket, bytes]:
    """Start an exec and return its hijacked connection plus any bytes already read past the
    HTTP headers (docker-py's socket=True can drop those)."""
    base = client.api.base_url
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if base.startswith("http+docker://localhost") and host.startswith("unix://"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(host[len("unix://"):])
        body = json.dumps({"Detach": False, "Tty": False}).encode()
        req = (
            f"POST /v{client.api._version}/exec/{exec_id}/start HTTP/1.1\r\n"
            "Host: docker\r\nContent-Type: application/json\r\n"
            "Connection: Upgrade\r\nUpgrade: tcp\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        sock.sendall(req)
        head = bytearray()
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                raise SandboxError("docker closed the exec connection")
            head += chunk
        header, _, rest = bytes(head).partition(b"\r\n\r\n")
        status = header.split(b"\r\n", 1)[0]
        if b" 101 " not in status and b" 200 " not in status:
            raise SandboxError(f"docker exec start failed: {header.decode(errors='replace')[:300]}")
        return sock, rest
    s = client.api.exec_start(exec_id, socket=True)
    return getattr(s, "_sock", s), b""


def exit_code(client: Any, exec_id: str, wait_s: float = 0.0, interval_s: float = 0.02) -> int | None:
    """The exec's exit code once it has ended (polling for up to ``wait_s``), else None."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            info = client.api.exec_inspect(exec_id)
        except Exception:  # noqa: BLE001
            return None
        if not info.get("Running"):
            return info.get("ExitCode")
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval_s)


def host_pid(client: Any, exec_id: str, wait_s: float = 1.0) -> int:
    """The host pid of the exec's process once the daemon knows it (0 if it never says)."""
    deadline = time.monotonic() + wait_s
    while True:
        pid = int(client.api.exec_inspect(exec_id).get("Pid") or 0)
        if pid or time.monotonic() >= deadline:
            return pid
        time.sleep(0.005)


def pump(
    client: Any,
    exec_id: str,
    sock: socket.socket,
    early: bytes,
    *,
    stdin: bytes | None,
    out: OutputCapture,
    err: OutputCapture,
    deadline: float,
    reap: Callable[[], None],
) -> tuple[str | None, int | None]:
    """Feed stdin, read the job's output into ``out``/``err`` until the stream ends; returns (killed reason, exit code).

    A timeout or a full capture calls ``reap`` once and drains for a bounded time. The stream stays open while
    any process holds the pipe (e.g. a daemonised child): once the exec's own process has exited, the output gets
    a moment, then the rest is reaped, which ends the stream.
    """
    killed: str | None = None
    if stdin is not None:
        sock.sendall(stdin)
        sock.shutdown(socket.SHUT_WR)
    sock.setblocking(False)
    demux = Demux()
    exited_at: float | None = None
    code: int | None = None
    pending = early
    while True:
        if pending:
            data, pending = pending, b""
        else:
            now = time.monotonic()
            if now >= deadline:
                if killed is None:
                    killed = "timeout"
                    reap()
                    deadline = now + _MAX_DRAIN_AFTER_KILL_S
                    continue
                break
            r, _, _ = select.select([sock], [], [], min(deadline - now, _POLL_S))
            if not r:
                if killed is None and exited_at is None:
                    info = client.api.exec_inspect(exec_id)
                    if not info.get("Running"):
                        exited_at, code = now, info.get("ExitCode")
                elif exited_at is not None and now - exited_at > _EXIT_GRACE_S:
                    reap()
                    deadline = min(deadline, now + _MAX_DRAIN_AFTER_KILL_S)
                continue
            try:
                data = sock.recv(_CHUNK)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                break
        for stream, payload in demux.feed(data):
            cap = out if stream == 1 else err
            if cap.feed(payload) and killed is None:
                killed = "output_cap"
                reap()
                deadline = time.monotonic() + _MAX_DRAIN_AFTER_KILL_S
    return killed, code


class DockerChannel(Channel):
    """A worker: an exec with stdin open, read by the calling thread (:meth:`pump`). ``on_kill`` ends its
    processes from the host."""

    pumped_by_caller = True

    def __init__(self, client: Any, exec_id: str, sock: socket.socket, early: bytes, on_kill: Callable[[], None]):
        super().__init__()
        self.client, self.exec_id, self.sock, self.early = client, exec_id, sock, early
        self._on_kill = on_kill
        self._dead = False
        self._demux = Demux()
        self._eof = False

    def start(self) -> None:
        pass

    def pump(self, timeout_s: float) -> None:
        if self._eof:
            return
        data, self.early = self.early, b""
        if not data:
            try:
                ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout_s))
                if not ready:
                    return
                data = self.sock.recv(_CHUNK, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except (OSError, ValueError):  # closed by kill()
                data = b""
            if not data:
                self._eof = True
                self.on_eof()
                return
        for stream, payload in self._demux.feed(data):
            (self.on_stdout if stream == 1 else self.on_stderr)(payload)

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def kill(self) -> None:
        if self._dead:
            return
        self._dead = True
        self._on_kill()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def exit_code(self, wait_s: float = 0.0) -> int | None:
        return exit_code(self.client, self.exec_id, wait_s)
