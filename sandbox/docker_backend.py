"""Docker backend: one long-lived, locked-down container per sandbox; execs and workers inside it. Host side.

The pieces, one job each: :mod:`sandbox.docker_container` (what the container and its volumes are, making and
removing them, pruning what dead processes left), :mod:`sandbox.docker_exec` (execs over the raw attach
socket: one-shot jobs and worker channels), :mod:`sandbox.docker_fifo` (a worker's protocol over two FIFOs,
past the daemon's relay, where this host can make them) and :mod:`sandbox.docker_procs` (killing the
container's processes from the host). This module ties them to the :class:`~sandbox.base.Sandbox` interface. A lease
(:mod:`sandbox.leftovers`) names the container and volume (the channels volume is named after it), so the next
process reaps them if this one is killed.

After every exec, every process in the container that is not PID 1 or part of a live worker is killed, so
nothing outlives an exec. Execs in one sandbox are serialised for that reason.

Every container runs as a host uid of its own, held host-wide from open() to the end of close() as bwrap's are
(:mod:`sandbox.uids`): the kernel's per-user budgets (inotify instances and watches, RLIMIT_NPROC, locks, message
queues, keys) are then never shared between two sandboxes, so one env that takes all of them starves no other.
Environments get only the standard ``PATH`` directories (the image's interpreter prefix is the host's).
"""

from __future__ import annotations

import io
import tarfile
import threading
import time
import uuid
import weakref
from typing import Any

from sandbox import docker_exec, docker_fifo, leftovers, runtime, uids
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
    exit_status,
    host_env_allowlist,
    normalize_relpath,
)
from sandbox.docker_container import (
    DEFAULT_IMAGE,
    budget_parent,
    channels_volume,
    create_work_volume,
    docker_sdk,
    image_search_path,
    missing_image,
    prune,
    remove,
    run_container,
    runtime_volume,
)
from sandbox.docker_procs import ContainerProcesses

__all__ = ["DEFAULT_IMAGE", "DockerSandbox", "probe", "prune"]


class DockerSandbox(Sandbox):
    backend = "docker"

    def __init__(self, limits: SandboxLimits | None = None, image: str = DEFAULT_IMAGE):
        super().__init__(limits)
        self.image = image
        docker = docker_sdk()
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
        self._inside: ContainerProcesses | None = None
        self._exec_lock = threading.Lock()
        self._env: dict[str, str] = {}
        self.name = f"trace-sbx-{uuid.uuid4().hex[:12]}"
        self._lease: leftovers.Lease | None = None
        self._finalizer: weakref.finalize | None = None
        self._channels = None  # host directory of the workers' FIFOs' volume (None: the protocol rides the attach stream)
        self._uid_hold: uids.UidHold | None = None
        self.uid = self.gid = runtime.SANDBOX_UID

    @property
    def user(self) -> str:
        """``uid:gid`` every process of this sandbox runs as."""
        return f"{self.uid}:{self.gid}"

    @property
    def workdir(self) -> str:
        return runtime.INSIDE_WORK

    # -- lifecycle -----------------------------------------------------------------------------------
    def open(self) -> None:
        if self._opened:
            return
        path = image_search_path(self.client, self.image)
        self._env = host_env_allowlist(runtime.INSIDE_WORK, runtime.INSIDE_RUNTIME, standard_path(path))
        rt_volume = runtime_volume(self.client, self.image)
        try:
            self._uid_hold = uids.allocate()  # no other live sandbox (bwrap's or Docker's) runs as it
            self.uid = self.gid = self._uid_hold.uid
            self._lease = leftovers.Lease(self.name, self.backend, container=self.name, volume=self.name)
            self.volume = create_work_volume(self.client, self.name, self.limits, self.hardened, self.uid, self.gid)
            parent, self.warning = budget_parent(self.client) if self.hardened else (None, None)
            self._channels = docker_fifo.channels_dir(self.client, self.name)
            self.container = run_container(
                self.client, self.image, self.name, limits=self.limits, hardened=self.hardened, env=self._env,
                runtime_vol=rt_volume, cgroup_parent=parent,
                channels=(channels_volume(self.name), docker_fifo.INSIDE_CHANNELS) if self._channels else None, user=self.user,
            )
            # Safety net: if the owner forgets close() (or the interpreter exits), still remove it.
            self._finalizer = weakref.finalize(self, remove, self.client, self.container.id, self.name)
            self.container.reload()
            self._inside = ContainerProcesses(self.client, self.container, self.user)
        except Exception:
            self._opened = True
            self.close()
            raise
        self._opened = True

    def _teardown(self) -> None:
        remove(self.client, self.container.id if self.container is not None else None,
               self.volume.name if self.volume is not None else None, warn=True)
        if self._inside is not None:
            self._inside.close()  # after the container is gone: a late kill must not reach the next namespace
        if self._finalizer is not None:
            self._finalizer.detach()
        if self._lease is not None:
            self._lease.release()
        if self._uid_hold is not None:
            self._uid_hold.release()  # after the container is gone: nothing runs as the uid any more
        try:
            self.client.close()  # no sockets left open until garbage collection
        except Exception:  # noqa: BLE001
            pass

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
                        ti.uid, ti.gid = self.uid, self.gid
                        tar.addfile(ti)
                raw = as_bytes(data)
                ti = tarfile.TarInfo(norm)
                ti.size, ti.mode, ti.mtime = len(raw), 0o644, int(time.time())
                ti.uid, ti.gid = self.uid, self.gid
                tar.addfile(ti, io.BytesIO(raw))
        try:
            ok = self.container.put_archive(runtime.INSIDE_WORK, buf.getvalue())
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
        assert self._inside is not None
        timeout = default_timeout(self.limits, timeout_s)
        out, err = OutputCapture(default_cap(self.limits, output_cap)), OutputCapture(default_cap(self.limits, output_cap))
        with self._exec_lock:
            started = time.monotonic()
            exec_id = docker_exec.create(self.client, self.container.id, check_argv(argv), stdin=stdin is not None,
                                         env=self._env, user=self.user)
            sock, early = docker_exec.start_socket(self.client, exec_id)
            try:
                killed, code = docker_exec.pump(self.client, exec_id, sock, early, stdin=stdin, out=out, err=err,
                                                deadline=started + timeout, reap=self._inside.reap)
            finally:
                try:
                    sock.close()
                except OSError:
                    pass
            if killed is None and code is None:
                code = docker_exec.exit_code(self.client, exec_id, wait_s=1.0, interval_s=0.005)
            self._inside.reap()  # nothing this exec started may outlive it
            duration = time.monotonic() - started
        reason = killed
        if killed is None and code is not None:
            code, reason = exit_status(code)
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
        inside = self._inside
        assert inside is not None
        fifos = None
        if self._channels is not None and argv[:3] == ["python", "-m", "sandbox.shim"]:
            fifos = docker_fifo.FifoPair(self._channels, self.uid, self.gid)  # the protocol past the daemon's relay
            argv = [*argv[:4], "--fifo-dir", docker_fifo.INSIDE_CHANNELS, *argv[4:]]
        try:
            exec_id = docker_exec.create(self.client, self.container.id, argv, stdin=True, env=self._env, user=self.user)
            sock, early = docker_exec.start_socket(self.client, exec_id)
        except BaseException:
            if fifos is not None:
                fifos.close()
            raise
        pid = docker_exec.host_pid(self.client, exec_id)
        if pid:
            inside.worker_pids.add(pid)

        def on_kill() -> None:
            inside.worker_pids.discard(pid)
            if pid and not self._closed:
                inside.kill_tree(pid)
                # Daemons that escaped the tree before the worker became their subreaper: when no exec is
                # running, everything that is not PID 1 or another live worker's tree goes too.
                if self._exec_lock.acquire(blocking=False):
                    try:
                        inside.reap()
                    finally:
                        self._exec_lock.release()

        if fifos is not None:
            return docker_fifo.FifoChannel(self.client, exec_id, sock, early, fifos, on_kill)
        return docker_exec.DockerChannel(self.client, exec_id, sock, early, on_kill)


_STANDARD_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def standard_path(path: str) -> str:
    """``path`` less what is not a standard directory (an image built from this host has the host's interpreter
    prefix first; ``/usr/local/bin/python`` points at the same interpreter), so no exec's environment names it."""
    kept = [p for p in path.split(":") if p in _STANDARD_PATH]
    return ":".join(kept) if "/usr/local/bin" in kept else "/usr/local/bin:/usr/bin:/bin"


_probe_lock = threading.Lock()
_probe_result: dict[str, str | None] = {}


def probe(refresh: bool = False, image: str = DEFAULT_IMAGE) -> str | None:
    """None if the docker backend can run here (daemon answers, image present), else why not."""
    with _probe_lock:
        if image in _probe_result and not refresh:
            return _probe_result[image]
        reason: str | None
        try:
            docker = docker_sdk()
            client = docker.from_env(timeout=5)
            client.ping()
            try:
                client.images.get(image)
                reason = None
            except docker.errors.ImageNotFound:
                reason = missing_image(image)
            client.close()
        except SandboxUnavailable as e:
            reason = str(e)
        except Exception as e:  # noqa: BLE001
            reason = f"docker daemon not reachable ({type(e).__name__}): start dockerd or run scripts/sandbox-services.sh"
        _probe_result[image] = reason
        return reason
