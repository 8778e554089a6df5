"""A Docker worker's protocol channel as a pair of FIFOs, past the daemon's relay. Host side.

Over ``docker exec``'s attach stream every byte crosses dockerd and containerd-shim both ways (host socket ->
dockerd -> FIFO -> containerd-shim -> pipe -> the process, and back with Docker's stream framing): on 2 cores
that relay is most of a Docker env step (``bench/bench_docker_path.py``). A worker's requests and replies
instead go through two FIFOs the host makes in a per-sandbox directory that the container sees read-only at
:data:`INSIDE_CHANNELS`; the attach stream still starts the worker and carries its stderr. The directory is a
Docker volume of its own (local driver, labelled and removed with the container: ``prune`` and the reaper take
it when its owner is dead), made by the host in the volume's directory under Docker's data root: the
container's mountinfo names no path of the user's tree (TMPDIR, the runtime dir, a home directory).

Nothing new is exposed to env code: the directory is root's, mode 0711 (not listable inside), holds FIFOs
only, and is read-only in the container; a FIFO's name is 128 random bits the host sends to the trusted shim
on the attach stream only, before any env code is loaded in that worker; both names are unlinked once the
shim's ready line arrives. The shim holds the FIFO ends as it held its stdin/stdout (non-dumpable, so no
``/proc/<shim>/fd``), and the env process inherits neither.

Opening order (no end ever blocks): the host opens both FIFOs ``O_RDWR`` first; the shim opens the reply FIFO
for writing and the request FIFO for reading; once its ready line is here the host reopens its ends one-way,
so the shim's death is an end of file on the reply FIFO and a write to a dead shim fails (EPIPE), as on pipes.
"""

from __future__ import annotations

import errno
import os
import secrets
import select
import socket
import time
from pathlib import Path
from typing import Any, Callable

from sandbox import runtime
from sandbox.base import Channel
from sandbox.docker_container import channels_volume, create_channels_volume
from sandbox.docker_exec import _CHUNK, Demux, exit_code

#: How long a dead worker's stderr gets to arrive over the attach stream after its reply FIFO ended.
_STDERR_GRACE_S = 2.0
#: Where the container sees its sandbox's channel directory (read-only).
INSIDE_CHANNELS = "/sandbox/channels"


def channels_dir(client: Any, name: str) -> Path | None:
    """Make sandbox ``name``'s channels volume (:func:`~sandbox.docker_container.channels_volume`) and return its
    host directory, root's and mode 0711, for the worker FIFOs; None where this host cannot reach it (not root,
    a daemon that is not on this machine, a volume directory not here, not empty or not root's), and the attach
    stream carries the protocol as before. The volume goes with the container
    (:func:`~sandbox.docker_container.remove`)."""
    if os.geteuid() != 0 or not os.environ.get("DOCKER_HOST", "unix://").startswith("unix://"):
        return None
    try:
        mountpoint = create_channels_volume(client, name)
        path = Path(mountpoint) if mountpoint else None
        if path is None or path.is_symlink() or not path.is_dir() or path.stat().st_uid != 0 or any(path.iterdir()):
            raise OSError(f"volume directory {mountpoint!r} not usable from this host")
        os.chmod(path, 0o711)  # not listable by the sandbox user: a FIFO's name is its only key
    except Exception:  # noqa: BLE001 - the daemon's refusal or an unreachable directory: the attach stream then
        try:
            client.api.remove_volume(channels_volume(name), force=True)
        except Exception:  # noqa: BLE001 - never made, or remove() takes it with the container
            pass
        return None
    return path


class FifoPair:
    """The host's ends of one worker's request and reply FIFOs."""

    def __init__(self, directory: Path, uid: int = runtime.SANDBOX_UID, gid: int = runtime.SANDBOX_GID) -> None:
        self.name = secrets.token_hex(16)
        self.request_path = directory / f"{self.name}.in"
        self.reply_path = directory / f"{self.name}.out"
        for path in (self.request_path, self.reply_path):
            os.mkfifo(path, 0o600)
            os.chown(path, uid, gid)  # the sandbox's own uid (sandbox.uids)
        self.request_fd = os.open(self.request_path, os.O_RDWR | os.O_CLOEXEC)
        self.reply_fd = os.open(self.reply_path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        self.one_way = False

    def go_one_way(self) -> None:
        """Once the shim holds its ends: keep only the host's direction of each FIFO and unlink both names."""
        if self.one_way:
            return
        self.one_way = True
        reply = os.open(self.reply_path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        os.close(self.reply_fd)
        self.reply_fd = reply
        try:
            request = os.open(self.request_path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:  # ENXIO: the shim is gone already; the reply FIFO's end of file says so
            if exc.errno != errno.ENXIO:
                raise
        else:
            os.set_blocking(request, True)
            os.close(self.request_fd)
            self.request_fd = request
        self._unlink()

    def _unlink(self) -> None:
        for path in (self.request_path, self.reply_path):
            try:
                os.unlink(path)
            except OSError:
                pass

    def close(self) -> None:
        for fd in (self.request_fd, self.reply_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self._unlink()


class FifoChannel(Channel):
    """A Docker worker whose protocol runs over a :class:`FifoPair`; the attach socket carries stderr and the
    start. Read by the calling thread (:meth:`pump`), as :class:`~sandbox.docker_exec.DockerChannel` is."""

    pumped_by_caller = True

    def __init__(self, client: Any, exec_id: str, sock: socket.socket, early: bytes, fifos: FifoPair,
                 on_kill: Callable[[], None]) -> None:
        super().__init__()
        self.client, self.exec_id, self.sock, self.fifos = client, exec_id, sock, fifos
        self._pending_attach = early
        self._on_kill = on_kill
        self._demux = Demux()
        self._attach_open = True
        self._eof = False
        self._dead = False
        self._seen_line = False

    def start(self) -> None:
        self.sock.sendall(f"{self.fifos.name}\n".encode("ascii"))  # the shim's key to its FIFOs, on attach only

    def _attach(self, data: bytes) -> None:
        for _stream, payload in self._demux.feed(data):
            self.on_stderr(payload)  # the shim points its stdout at stderr: all of it is noise, budgeted

    def _read_attach(self) -> None:
        try:
            data = self.sock.recv(_CHUNK, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except (OSError, ValueError):
            data = b""
        if data:
            self._attach(data)
            return
        self._attach_open = False
        if not self.fifos.one_way:  # died before it was ready: its reply FIFO never ends on its own
            self._drain_replies()
            self._end()

    def _drain_replies(self) -> None:
        while True:
            try:
                data = os.read(self.fifos.reply_fd, _CHUNK)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                if self.fifos.one_way:
                    self._drain_attach(_STDERR_GRACE_S)  # its last words on stderr come the slower way
                    self._end()
                return
            self._reply(data)

    def _drain_attach(self, wait_s: float) -> None:
        """Read the attach stream (stderr) until it ends, for at most ``wait_s``."""
        deadline = time.monotonic() + wait_s
        while self._attach_open and (left := deadline - time.monotonic()) > 0:
            try:
                ready, _, _ = select.select([self.sock], [], [], left)
            except (OSError, ValueError):
                return
            if not ready:
                return
            self._read_attach()

    def _reply(self, data: bytes) -> None:
        self.on_stdout(data)
        if not self._seen_line and b"\n" in data:
            self._seen_line = True
            self.fifos.go_one_way()  # the ready line: the shim holds both ends

    def _end(self) -> None:
        if not self._eof:
            self._eof = True
            self.on_eof()

    def pump(self, timeout_s: float) -> None:
        if self._eof:
            return
        if self._pending_attach:
            data, self._pending_attach = self._pending_attach, b""
            self._attach(data)
        watched = [self.fifos.reply_fd] + ([self.sock] if self._attach_open else [])
        try:
            ready, _, _ = select.select(watched, [], [], max(0.0, timeout_s))
        except (OSError, ValueError):  # closed by kill()
            self._end()
            return
        if self.fifos.reply_fd in ready:
            self._drain_replies()
        if self._attach_open and self.sock in ready:
            self._read_attach()

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fifos.request_fd, view):]

    def kill(self) -> None:
        if self._dead:
            return
        self._dead = True
        self._on_kill()
        self.fifos.close()
        for step in (lambda: self.sock.shutdown(socket.SHUT_RDWR), self.sock.close):
            try:
                step()
            except OSError:
                pass

    def exit_code(self, wait_s: float = 0.0) -> int | None:
        return exit_code(self.client, self.exec_id, wait_s)
