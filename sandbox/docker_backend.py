"""Docker backend: one long-lived, locked-down container per sandbox; execs and workers inside it.

The container: no network (``network_mode=none``), read-only root filesystem, ``cap_drop=ALL``,
``no-new-privileges``, the project's default-deny seccomp profile (:mod:`sandbox.syscalls`; Docker's
default one lets ``io_uring_setup`` through), uid/gid 65534, a pids limit, a memory limit (swap
included; tmpfs pages count), a CPU quota, rlimits for CPU seconds / file size / core dumps,
size-capped tmpfs ``/tmp`` and ``/dev/shm``, a per-sandbox work volume at ``/sandbox/work`` that is
itself a tmpfs capped in bytes and inodes, and the trusted runtime in a read-only volume at
``/sandbox/runtime``. A lease (:mod:`sandbox.leftovers`) names the container and volume, so the
next process reaps them if this one is killed.
Nothing from the host environment is passed in. PID 1 is a tiny reaper (``python -S``) so
orphans cannot pile up as zombies against the pids limit.

Exec output is read from the raw attach socket by the calling thread with ``select`` and a
deadline; killing never goes through that reader (nor through the daemon, when it is local): we
find the container's processes through the host's /proc (same pid namespace as PID 1) and
SIGKILL them. That avoids the known hang where the thread that reads a flooding stream is also
the one asked to kill it. After every exec, every process in the container that is not PID 1
or part of a live worker is killed, so nothing outlives an exec. Execs in one sandbox are
serialised for that reason.
"""

from __future__ import annotations

import io
import json
import os
import select
import signal
import socket
import struct
import tarfile
import threading
import time
import uuid
import weakref
from typing import Any

from sandbox import leftovers, runtime, syscalls
from sandbox.base import (
    Channel,
    ExecResult,
    OutputCapture,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
    as_bytes,
    check_argv,
    default_cap,
    default_timeout,
    host_env_allowlist,
    normalize_relpath,
)

DEFAULT_IMAGE = os.environ.get("TRACE_SANDBOX_IMAGE", "trace-factory-sandbox:py311")
INSIDE_WORK = "/sandbox/work"
INSIDE_RUNTIME = "/sandbox/runtime"
USER = f"{runtime.SANDBOX_UID}:{runtime.SANDBOX_GID}"
LABEL = "trace-factory.sandbox"

# PID 1: reap every child that dies (orphans are re-parented here), do nothing else.
INIT_SRC = (
    "import os,signal\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK,{signal.SIGCHLD})\n"
    "while True:\n"
    " signal.sigwait({signal.SIGCHLD})\n"
    " while True:\n"
    "  try:\n"
    "   p,_=os.waitpid(-1,os.WNOHANG)\n"
    "  except ChildProcessError:\n"
    "   break\n"
    "  if p==0:\n"
    "   break\n"
)

# Fallback killer when the daemon is not on this host: runs inside as the sandbox user.
_KILL_INSIDE_SRC = (
    "import os,sys\n"
    "keep={1,os.getpid(),os.getppid()}|{int(a) for a in sys.argv[1:]}\n"
    "for _ in range(20):\n"
    " left=[int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) not in keep]\n"
    " if not left: break\n"
    " for p in left:\n"
    "  try: os.kill(p,9)\n"
    "  except OSError: pass\n"
)

_CHUNK = 1 << 16
_MAX_DRAIN_AFTER_KILL_S = 5.0
_POLL_S = 0.1
_EXIT_GRACE_S = 0.3


def _docker():  # type: ignore[no-untyped-def]
    try:
        import docker
    except ImportError as e:  # pragma: no cover - depends on the install
        raise SandboxUnavailable("docker SDK not installed: pip install 'trace-factory[docker]'") from e
    return docker


class _Demux:
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


class DockerSandbox(Sandbox):
    backend = "docker"

    def __init__(self, limits: SandboxLimits | None = None, image: str = DEFAULT_IMAGE):
        super().__init__(limits)
        self.image = image
        docker = _docker()
        client = None
        try:
            client = docker.from_env(timeout=120)
            client.ping()
        except Exception as e:  # noqa: BLE001
            if client is not None:
                client.close()
            raise SandboxUnavailable(f"docker daemon not reachable: {e}") from e
        self.client = client
        self.container: Any = None
        self.volume: Any = None
        self._init_pid: int | None = None
        self._pidns: str | None = None
        self._local = False
        self._exec_lock = threading.Lock()
        self._worker_pids: set[int] = set()
        self._env: dict[str, str] = {}
        self.name = f"trace-sbx-{uuid.uuid4().hex[:12]}"
        self._lease: leftovers.Lease | None = None

    @property
    def workdir(self) -> str:
        return INSIDE_WORK

    # -- lifecycle -----------------------------------------------------------------------------------
    def open(self) -> None:
        if self._opened:
            return
        docker = _docker()
        try:
            img = self.client.images.get(self.image)
        except docker.errors.ImageNotFound as e:
            raise SandboxUnavailable(
                f"docker image {self.image} missing: run `python -m sandbox.image build` "
                "(or scripts/sandbox-services.sh)") from e
        img_env = dict(kv.split("=", 1) for kv in (img.attrs.get("Config", {}).get("Env") or []) if "=" in kv)
        path = img_env.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        self._env = host_env_allowlist(INSIDE_WORK, INSIDE_RUNTIME, path)
        rt_volume = self._runtime_volume()
        lim = self.limits
        mb = 1024 * 1024
        Ulimit = docker.types.Ulimit
        try:
            owner = _owner_labels()
            self._lease = leftovers.Lease(self.name, self.backend, container=self.name, volume=self.name)
            tmpfs = {"type": "tmpfs", "device": "tmpfs",
                     "o": f"size={lim.workdir_mb}m,nr_inodes={lim.workdir_inodes},uid={runtime.SANDBOX_UID},"
                          f"gid={runtime.SANDBOX_GID},mode=0700,nosuid,nodev"}
            self.volume = self.client.volumes.create(
                name=self.name, labels={LABEL: "work", **owner}, driver="local",
                driver_opts=tmpfs if self.hardened else {},
            )
            hardening = dict(nano_cpus=int(lim.cpu_quota * 1e9), shm_size=f"{lim.shm_mb}m")
            seccomp = [f"seccomp={syscalls.docker_profile()}"] if self.hardened else []
            self.container = self.client.containers.run(
                self.image,
                ["python", "-S", "-c", INIT_SRC],
                name=self.name,
                detach=True,
                user=USER,
                network_mode="none",
                read_only=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges", *seccomp],
                pids_limit=lim.max_processes,
                mem_limit=f"{lim.memory_mb}m",
                memswap_limit=f"{lim.memory_mb}m",
                **(hardening if self.hardened else {}),
                ulimits=[
                    Ulimit(name="cpu", soft=lim.cpu_seconds, hard=lim.cpu_seconds + 1),
                    Ulimit(name="fsize", soft=lim.file_size_mb * mb, hard=lim.file_size_mb * mb),
                    Ulimit(name="core", soft=0, hard=0),
                ],
                tmpfs={"/tmp": f"rw,nosuid,nodev,size={max(16, lim.file_size_mb)}m,mode=1777"},
                volumes={
                    self.name: {"bind": INSIDE_WORK, "mode": "rw"},
                    rt_volume: {"bind": INSIDE_RUNTIME, "mode": "ro"},
                },
                working_dir=INSIDE_WORK,
                environment=self._env,
                hostname="sandbox",
                labels={LABEL: "sandbox", **owner},
                ipc_mode="private",
            )
            # Safety net: if the owner forgets close() (or the interpreter exits), still remove it.
            self._finalizer = weakref.finalize(self, _remove_quietly, self.client, self.container.id, self.name)
            self.container.reload()
            self._init_pid = int(self.container.attrs["State"]["Pid"])
            self._local = self._check_local()
        except Exception:
            self._opened = True
            self.close()
            raise
        self._opened = True

    def _check_local(self) -> bool:
        """Is the container's PID 1 visible (and ours to signal) in this host's /proc?"""
        pid = self._init_pid
        if not pid or os.geteuid() != 0:
            return False
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                cg = f.read()
            if self.container.id not in cg:
                return False
            self._pidns = os.readlink(f"/proc/{pid}/ns/pid")
            return True
        except OSError:
            return False

    def _runtime_volume(self) -> str:
        """A read-only volume holding the trusted packages, content-addressed and reused."""
        files = runtime.runtime_files()
        digest = runtime.content_hash(files)
        name = f"trace-sbx-runtime-{digest}"
        ready = f"{name}-ready"
        docker = _docker()
        try:
            self.client.volumes.get(ready)
            return name
        except docker.errors.NotFound:
            pass
        self.client.volumes.create(name=name, labels={LABEL: "runtime"})
        helper = self.client.containers.create(
            self.image, ["true"], network_mode="none", volumes={name: {"bind": INSIDE_RUNTIME, "mode": "rw"}},
            labels={LABEL: "helper", **_owner_labels()},
        )
        try:
            if not helper.put_archive(INSIDE_RUNTIME, runtime.runtime_tar(files)):
                raise SandboxError("could not copy the runtime into the docker volume")
        finally:
            helper.remove(force=True)
        self.client.volumes.create(name=ready, labels={LABEL: "runtime-ready"})
        return name

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_workers()
        if self.container is not None:
            for attempt in range(3):
                try:
                    self.container.remove(force=True)
                    break
                except Exception as e:  # noqa: BLE001
                    if "No such container" in str(e) or "is already in progress" in str(e):
                        break
                    if attempt == 2:
                        import sys

                        print(f"WARNING: sandbox container {self.name} could not be removed: {e}", file=sys.stderr)
                    time.sleep(0.2)
        if getattr(self, "_finalizer", None) is not None:
            self._finalizer.detach()
        if self.volume is not None:
            for _ in range(5):
                try:
                    self.volume.remove(force=True)
                    break
                except Exception:  # noqa: BLE001 - container removal may still be settling
                    time.sleep(0.1)
        if self._lease is not None:
            self._lease.release()
        try:
            self.client.close()  # no sockets left open until garbage collection
        except Exception:  # noqa: BLE001
            pass

    # -- process control -------------------------------------------------------------------------------
    def _container_procs(self) -> dict[int, int]:
        """host pid -> host ppid for every process in the container's pid namespace."""
        procs: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") != self._pidns:
                    continue
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
                ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
            except (OSError, ValueError):
                continue
            procs[int(entry)] = ppid
        return procs

    def _reap(self, keep_workers: bool = True, only: set[int] | None = None) -> None:
        """SIGKILL every container process except PID 1 and (optionally) live workers' trees."""
        if not self._local:
            self._kill_inside()
            return
        for _ in range(50):
            procs = self._container_procs()
            keep = {self._init_pid}
            if keep_workers:
                keep |= _descendants(procs, {p for p in self._worker_pids if p in procs})
            victims = [p for p in procs if p not in keep and (only is None or p in only)]
            if not victims:
                return
            for p in victims:
                try:
                    os.kill(p, 9)
                except OSError:
                    pass
            time.sleep(0.002)

    def _kill_tree(self, root: int) -> None:
        """Kill one worker's process tree (host pids). The worker is its descendants' subreaper, so
        double-forked daemons are in the tree; the tree is stopped first (no forking while we kill),
        then killed, until nothing of it is left."""
        if not self._local:
            self._kill_inside()
            return
        for _ in range(50):
            procs = self._container_procs()
            tree = _descendants(procs, {root} & set(procs))
            if not tree:
                return
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                for p in tree:
                    try:
                        os.kill(p, sig)
                    except OSError:
                        pass
            time.sleep(0.002)

    def _kill_inside(self) -> None:
        """Remote daemon: kill from inside (everything but PID 1, workers included)."""
        try:
            self.client.api.exec_start(self.client.api.exec_create(
                self.container.id, ["python", "-S", "-c", _KILL_INSIDE_SRC], user=USER)["Id"])
        except Exception:  # noqa: BLE001
            pass

    # -- attach sockets --------------------------------------------------------------------------------
    def _exec_create(self, argv: list[str], stdin: bool) -> str:
        return self.client.api.exec_create(
            self.container.id, argv, stdout=True, stderr=True, stdin=stdin, tty=False,
            user=USER, workdir=INSIDE_WORK, environment=self._env,
        )["Id"]

    def _exec_start_socket(self, exec_id: str) -> tuple[socket.socket, bytes]:
        """Start an exec and return its hijacked connection plus any bytes already read past the
        HTTP headers (docker-py's socket=True can drop those)."""
        base = self.client.api.base_url
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        if base.startswith("http+docker://localhost") and host.startswith("unix://"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(host[len("unix://"):])
            body = json.dumps({"Detach": False, "Tty": False}).encode()
            req = (
                f"POST /v{self.client.api._version}/exec/{exec_id}/start HTTP/1.1\r\n"
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
        s = self.client.api.exec_start(exec_id, socket=True)
        return getattr(s, "_sock", s), b""

    # -- interface -------------------------------------------------------------------------------------
    def put_files(self, files: dict[str, bytes | str]) -> None:
        self._check_open()
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            dirs: set[str] = set()
            for rel, data in files.items():
                norm = normalize_relpath(rel)
                parts = norm.split("/")
                for i in range(1, len(parts)):
                    d = "/".join(parts[:i])
                    if d not in dirs:
                        dirs.add(d)
                        ti = tarfile.TarInfo(d)
                        ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                        ti.uid = ti.gid = runtime.SANDBOX_UID
                        tar.addfile(ti)
                raw = as_bytes(data)
                ti = tarfile.TarInfo(norm)
                ti.size, ti.mode, ti.mtime = len(raw), 0o644, int(time.time())
                ti.uid = ti.gid = runtime.SANDBOX_UID
                tar.addfile(ti, io.BytesIO(raw))
        try:
            ok = self.container.put_archive(INSIDE_WORK, buf.getvalue())
        except Exception as e:  # noqa: BLE001
            raise SandboxError(f"put_files failed: {e}") from e
        if not ok:
            raise SandboxError("put_files failed")

    def exec(
        self,
        argv: list[str],
        timeout_s: float | None = None,
        output_cap: int | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        self._check_open()
        timeout = default_timeout(self.limits, timeout_s)
        out, err = OutputCapture(default_cap(self.limits, output_cap)), OutputCapture(default_cap(self.limits, output_cap))
        with self._exec_lock:
            started = time.monotonic()
            exec_id = self._exec_create(check_argv(argv), stdin is not None)
            sock, early = self._exec_start_socket(exec_id)
            killed: str | None = None
            try:
                if stdin is not None:
                    sock.sendall(stdin)
                    sock.shutdown(socket.SHUT_WR)
                sock.setblocking(False)
                demux = _Demux()
                deadline = started + timeout
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
                                self._reap()
                                deadline = now + _MAX_DRAIN_AFTER_KILL_S
                                continue
                            break
                        r, _, _ = select.select([sock], [], [], min(deadline - now, _POLL_S))
                        if not r:
                            # The stream stays open while any process holds the pipe (e.g. a
                            # daemonised child): once the exec's own process has exited, give the
                            # output a moment, then reap the rest, which ends the stream.
                            if killed is None and exited_at is None:
                                info = self.client.api.exec_inspect(exec_id)
                                if not info.get("Running"):
                                    exited_at, code = now, info.get("ExitCode")
                            elif exited_at is not None and now - exited_at > _EXIT_GRACE_S:
                                self._reap()
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
                            self._reap()
                            deadline = time.monotonic() + _MAX_DRAIN_AFTER_KILL_S
            finally:
                try:
                    sock.close()
                except OSError:
                    pass
            if killed is None and code is None:
                for _ in range(200):
                    info = self.client.api.exec_inspect(exec_id)
                    if not info.get("Running"):
                        code = info.get("ExitCode")
                        break
                    time.sleep(0.005)
            self._reap()  # nothing this exec started may outlive it
            duration = time.monotonic() - started
        reason = killed
        if killed is None and code is not None and 128 < code < 128 + 65:
            import signal

            try:
                reason = f"signal:{signal.Signals(code - 128).name}"
            except ValueError:
                reason = None
        return ExecResult(
            exit_code=None if killed else code,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=killed == "timeout",
            truncated=out.truncated or err.truncated,
            duration_s=round(duration, 6),
            killed_reason=reason,
        )

    def _spawn_worker(self, argv: list[str]) -> Channel:
        self._check_open()
        exec_id = self._exec_create(argv, stdin=True)
        sock, early = self._exec_start_socket(exec_id)
        pid = 0
        for _ in range(200):
            pid = int(self.client.api.exec_inspect(exec_id).get("Pid") or 0)
            if pid:
                break
            time.sleep(0.005)
        if pid:
            self._worker_pids.add(pid)
        return _DockerChannel(self, exec_id, sock, early, pid)


class _DockerChannel(Channel):
    def __init__(self, sb: DockerSandbox, exec_id: str, sock: socket.socket, early: bytes, pid: int):
        super().__init__()
        self.sb, self.exec_id, self.sock, self.early, self.pid = sb, exec_id, sock, early, pid
        self._thread: threading.Thread | None = None
        self._dead = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._pump, daemon=True, name="sandbox-docker-worker")
        self._thread.start()

    def _pump(self) -> None:
        demux = _Demux()
        data = self.early
        try:
            while True:
                if data:
                    for stream, payload in demux.feed(data):
                        (self.on_stdout if stream == 1 else self.on_stderr)(payload)
                data = self.sock.recv(_CHUNK)
                if not data:
                    break
        except OSError:
            pass
        finally:
            self.on_eof()

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def kill(self) -> None:
        if self._dead:
            return
        self._dead = True
        self.sb._worker_pids.discard(self.pid)
        if self.pid and not self.sb._closed:
            self.sb._kill_tree(self.pid)
            # Daemons that escaped the tree before the worker became their subreaper: when no exec is
            # running, everything that is not PID 1 or another live worker's tree goes too.
            if self.sb._exec_lock.acquire(blocking=False):
                try:
                    self.sb._reap(keep_workers=True)
                finally:
                    self.sb._exec_lock.release()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def exit_code(self, wait_s: float = 0.0) -> int | None:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                info = self.sb.client.api.exec_inspect(self.exec_id)
            except Exception:  # noqa: BLE001
                return None
            if not info.get("Running"):
                return info.get("ExitCode")
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.02)


def _descendants(procs: dict[int, int], roots: set[int]) -> set[int]:
    """``roots`` and every process below them, from a pid -> ppid map."""
    found, frontier = set(roots), list(roots)
    while frontier:
        parent = frontier.pop()
        for pid, ppid in procs.items():
            if ppid == parent and pid not in found:
                found.add(pid)
                frontier.append(pid)
    return found


def _remove_quietly(client: Any, container_id: str, volume: str) -> None:
    try:
        client.api.remove_container(container_id, force=True)
    except Exception:  # noqa: BLE001
        pass
    try:
        client.api.remove_volume(volume, force=True)
    except Exception:  # noqa: BLE001
        pass


def _owner_labels() -> dict[str, str]:
    """Who created a container: lets prune() remove only what a dead process left behind."""
    return {f"{LABEL}.owner": leftovers.owner_id()}


def _owner_alive(owner: str) -> bool:
    return leftovers.owner_alive(owner)


def remove_container_and_volume(container: str | None, volume: str | None) -> list[str]:
    """Remove one sandbox's container and work volume by name (the reaper's Docker half)."""
    removed: list[str] = []
    try:
        client = _docker().from_env(timeout=60)
    except Exception:  # noqa: BLE001 - no daemon: nothing of ours can be running there either
        return removed
    try:
        if container:
            try:
                client.api.remove_container(container, force=True)
                removed.append(f"container {container}")
            except Exception:  # noqa: BLE001 - already gone
                pass
        if volume:
            for _ in range(5):
                try:
                    client.api.remove_volume(volume, force=True)
                    removed.append(f"volume {volume}")
                    break
                except Exception as e:  # noqa: BLE001
                    if "no such volume" in str(e).lower() or "not found" in str(e).lower():
                        break
                    time.sleep(0.1)
    finally:
        client.close()
    return removed


def prune() -> list[str]:
    """Remove sandbox containers and work volumes whose creating process is gone (crashes,
    kill -9). Sandboxes of live processes - other users' tests, a long training run - are kept."""
    docker = _docker()
    client = docker.from_env(timeout=60)
    try:
        return _prune(client)
    finally:
        client.close()


def _prune(client: Any) -> list[str]:
    removed = []
    for c in client.containers.list(all=True, filters={"label": LABEL}):
        owner = c.labels.get(f"{LABEL}.owner")
        if owner and not _owner_alive(owner):
            _remove_quietly(client, c.id, c.name)
            removed.append(c.name)
    live = {c.name for c in client.containers.list(all=True, filters={"label": LABEL})}
    for v in client.volumes.list(filters={"label": f"{LABEL}=work"}):
        owner = (v.attrs.get("Labels") or {}).get(f"{LABEL}.owner")
        if v.name not in live and owner and not _owner_alive(owner):
            try:
                v.remove()
                removed.append(f"volume {v.name}")
            except Exception:  # noqa: BLE001 - in use or racing with a starting sandbox
                pass
    return removed


_probe_lock = threading.Lock()
_probe_result: dict[str, str | None] = {}


def probe(refresh: bool = False, image: str = DEFAULT_IMAGE) -> str | None:
    """None if the docker backend can run here (daemon answers, image present), else why not."""
    with _probe_lock:
        if image in _probe_result and not refresh:
            return _probe_result[image]
        reason: str | None
        try:
            docker = _docker()
            client = docker.from_env(timeout=5)
            client.ping()
            try:
                client.images.get(image)
                reason = None
            except docker.errors.ImageNotFound:
                reason = f"docker image {image} missing: run `python -m sandbox.image build` (or scripts/sandbox-services.sh)"
            client.close()
        except SandboxUnavailable as e:
            reason = str(e)
        except Exception as e:  # noqa: BLE001
            reason = f"docker daemon not reachable ({type(e).__name__}): start dockerd or run scripts/sandbox-services.sh"
        _probe_result[image] = reason
        return reason


if __name__ == "__main__":  # pragma: no cover
    import sys

    if sys.argv[1:2] == ["prune"]:
        print("removed:", ", ".join(prune()) or "nothing")
    else:
        print("usage: python -m sandbox.docker_backend prune   (removes sandboxes of dead processes)")
