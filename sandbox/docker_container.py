"""A Docker sandbox's container and volumes: what they are, how they are made, and how they go. Host side.

The container: no network (``network_mode=none``), read-only root filesystem, ``cap_drop=ALL``,
``no-new-privileges``, the project's default-deny seccomp profile (:mod:`sandbox.syscalls`; Docker's
default one lets ``io_uring_setup`` through), a uid/gid of its own (:mod:`sandbox.uids`: per-user kernel budgets such
as inotify instances are never shared with another sandbox), a pids limit, a memory limit (swap
included; tmpfs pages count), a CPU quota, rlimits for CPU seconds / file size / core dumps,
size-capped tmpfs ``/tmp`` and ``/dev/shm``, a per-sandbox work volume at ``/sandbox/work`` that is
itself a tmpfs capped in bytes and inodes (so are /tmp and /dev/shm), RLIMIT_NOFILE, and the trusted runtime
in a read-only volume at ``/sandbox/runtime``, the workers' FIFOs (:mod:`sandbox.docker_fifo`) in a per-sandbox
volume mounted read-only at ``/sandbox/channels``: every mount comes from Docker's data root, so the container's
mountinfo names no path of the user's tree. Nothing from the host environment is passed in; no log driver.
PID 1 is a tiny reaper (``python -S``) so orphans cannot pile up as zombies against the pids limit; it re-executes
itself with an empty environment first, so ``/proc/1/environ`` holds nothing Docker put there. With the
cgroupfs driver the container lives under the parent group that holds all sandboxes' budget.

Everything carries the label ``trace-factory.sandbox`` and its creator's owner id, so :func:`prune` removes
only what a dead process left behind; the lease (:mod:`sandbox.leftovers`) names the same container and
work volume, and the reaper removes them (and the channels volume named after the work volume) through
:func:`remove_container_and_volume`.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable

from sandbox import budget, owners, runtime, syscalls
from sandbox.base import SandboxError, SandboxLimits, SandboxUnavailable

DEFAULT_IMAGE = os.environ.get("TRACE_SANDBOX_IMAGE", "trace-factory-sandbox:py311")
USER = f"{runtime.SANDBOX_UID}:{runtime.SANDBOX_GID}"
LABEL = "trace-factory.sandbox"

# PID 1: reap every child that dies (orphans are re-parented here), do nothing else.
# BOOT_SRC runs first and re-executes PID 1 as INIT_SRC with an empty environment (Docker always sets PATH and
# HOSTNAME; what PID 1 was started with stays readable in /proc/1/environ for its whole life).
BOOT_SRC = "import os,sys\nos.execve(sys.executable,['python','-S','-c',sys.argv[1]],{})\n"
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


def docker_sdk():  # type: ignore[no-untyped-def]
    """The ``docker`` package, or SandboxUnavailable saying how to install it."""
    try:
        import docker
    except ImportError as e:  # pragma: no cover - depends on the install
        raise SandboxUnavailable("docker SDK not installed: pip install 'trace-factory[docker]'") from e
    return docker


def missing_image(image: str) -> str:
    return f"docker image {image} missing: run `factory sandbox build-image` (or scripts/sandbox-services.sh)"


def owner_labels() -> dict[str, str]:
    """Who created a container: lets prune() remove only what a dead process left behind."""
    return {f"{LABEL}.owner": owners.owner_id()}


def image_search_path(client: Any, image: str) -> str:
    """The image's ``PATH`` (it holds the interpreter's bin dir); SandboxUnavailable if the image is missing."""
    try:
        img = client.images.get(image)
    except docker_sdk().errors.ImageNotFound as e:
        raise SandboxUnavailable(missing_image(image)) from e
    img_env = dict(kv.split("=", 1) for kv in (img.attrs.get("Config", {}).get("Env") or []) if "=" in kv)
    return img_env.get("PATH", "/usr/local/bin:/usr/bin:/bin")


def runtime_volume(client: Any, image: str) -> str:
    """A read-only volume holding the trusted packages, content-addressed and reused."""
    files = runtime.runtime_files()
    digest = runtime.content_hash(files)
    name = f"trace-sbx-runtime-{digest}"
    ready = f"{name}-ready"
    try:
        client.volumes.get(ready)
        return name
    except docker_sdk().errors.NotFound:
        pass
    client.volumes.create(name=name, labels={LABEL: "runtime"})
    helper = client.containers.create(
        image, ["true"], network_mode="none", volumes={name: {"bind": runtime.INSIDE_RUNTIME, "mode": "rw"}},
        labels={LABEL: "helper", **owner_labels()},
    )
    try:
        if not helper.put_archive(runtime.INSIDE_RUNTIME, runtime.runtime_tar(files)):
            raise SandboxError("could not copy the runtime into the docker volume")
    finally:
        helper.remove(force=True)
    client.volumes.create(name=ready, labels={LABEL: "runtime-ready"})
    return name


def create_work_volume(client: Any, name: str, limits: SandboxLimits, hardened: bool,
                       uid: int = runtime.SANDBOX_UID, gid: int = runtime.SANDBOX_GID) -> Any:
    """The sandbox's work volume: a tmpfs capped in bytes and inodes, owned by the sandbox's uid."""
    tmpfs = {"type": "tmpfs", "device": "tmpfs",
             "o": f"size={limits.workdir_mb}m,nr_inodes={limits.workdir_inodes},uid={uid},"
                  f"gid={gid},mode=0700,nosuid,nodev"}
    return client.volumes.create(
        name=name, labels={LABEL: "work", **owner_labels()}, driver="local", driver_opts=tmpfs if hardened else {},
    )


def channels_volume(name: str) -> str:
    """The name of sandbox ``name``'s channels volume (its work volume is ``name``)."""
    return f"{name}-channels"


def create_channels_volume(client: Any, name: str) -> str | None:
    """Sandbox ``name``'s volume for its workers' FIFOs (local driver, a directory under Docker's data root);
    its host directory (``Mountpoint``), or None where the daemon names none."""
    volume = client.volumes.create(name=channels_volume(name), labels={LABEL: "channels", **owner_labels()}, driver="local")
    return (volume.attrs or {}).get("Mountpoint") or None


def budget_parent(client: Any) -> tuple[str | None, str | None]:
    """(cgroup_parent, None) putting containers under the parent group that carries the budget of all sandboxes
    (:mod:`sandbox.budget`), with that budget written; or (None, why not). Only a local daemon with the cgroupfs
    driver names the parent by path; with systemd's driver the parent would be a slice we do not manage."""
    try:
        info = client.info()
    except Exception as exc:  # noqa: BLE001
        return None, f"no limit across sandboxes (docker info: {exc})"
    if info.get("CgroupDriver") != "cgroupfs" or os.geteuid() != 0:
        return None, f"no limit across sandboxes (docker cgroup driver {info.get('CgroupDriver')!r}, needs cgroupfs and root)"
    group = budget.parent_name()
    version = 2 if str(info.get("CgroupVersion")) == "2" else 1
    root = "/sys/fs/cgroup"
    if version == 2:
        parents = {"": os.path.join(root, group)}
    else:
        parents = {c: os.path.join(root, c, group) for c in ("pids", "memory")}
    try:
        for directory in parents.values():
            os.makedirs(directory, exist_ok=True)
        if version == 2:
            with open(os.path.join(root, group, "cgroup.subtree_control"), "w") as f:
                f.write("+memory +pids")
    except OSError as exc:
        return None, f"no limit across sandboxes ({exc.strerror}: {exc.filename})"
    return f"/{group}", budget.apply(parents, version)


def run_container(
    client: Any, image: str, name: str, *, limits: SandboxLimits, hardened: bool, env: dict[str, str], runtime_vol: str,
    cgroup_parent: str | None = None, channels: tuple[str, str] | None = None, user: str = USER,
) -> Any:
    """Start the locked-down container (work volume ``name`` must exist) with PID 1 the reaper. ``channels``:
    (volume, path inside) of the workers' FIFOs (:mod:`sandbox.docker_fifo`), mounted read-only, never filled
    from the image (``nocopy``: the host set its mode). ``user``:
    ``uid:gid`` every process of the container runs as (the sandbox's own, :mod:`sandbox.uids`)."""
    lim = limits
    mb = 1024 * 1024
    Ulimit = docker_sdk().types.Ulimit
    hardening = dict(nano_cpus=int(lim.cpu_quota * 1e9))
    seccomp = [f"seccomp={syscalls.docker_profile()}"] if hardened else []
    files = min(lim.open_files, budget.host_budget().files_per_task)
    tmpfs = {"/tmp": f"rw,nosuid,nodev,size={max(16, lim.file_size_mb)}m,mode=1777"}
    if hardened:  # /dev/shm too, capped in bytes and inodes (shm_size takes no inode cap)
        tmpfs = {path: f"{opts},nr_inodes={lim.tmpfs_inodes}" for path, opts in
                 {**tmpfs, "/dev/shm": f"rw,nosuid,nodev,size={lim.shm_mb}m,mode=1777"}.items()}
    return client.containers.run(
        image,
        ["python", "-S", "-c", BOOT_SRC, INIT_SRC],
        name=name,
        detach=True,
        user=user,
        network_mode="none",
        read_only=True,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges", *seccomp],
        pids_limit=lim.max_processes,
        mem_limit=f"{lim.memory_mb}m",
        memswap_limit=f"{lim.memory_mb}m",
        **(hardening if hardened else {}),
        **({"cgroup_parent": cgroup_parent} if cgroup_parent else {}),
        ulimits=[
            Ulimit(name="cpu", soft=lim.cpu_seconds, hard=lim.cpu_seconds + 1),
            Ulimit(name="fsize", soft=lim.file_size_mb * mb, hard=lim.file_size_mb * mb),
            Ulimit(name="core", soft=0, hard=0),
            Ulimit(name="nofile", soft=files, hard=files),
        ],
        tmpfs=tmpfs,
        volumes={
            name: {"bind": runtime.INSIDE_WORK, "mode": "rw"},
            runtime_vol: {"bind": runtime.INSIDE_RUNTIME, "mode": "ro"},
            **({channels[0]: {"bind": channels[1], "mode": "ro,nocopy"}} if channels else {}),
        },
        working_dir=runtime.INSIDE_WORK,
        environment=env,
        hostname="sandbox",
        labels={LABEL: "sandbox", **owner_labels()},
        ipc_mode="private",
        # PID 1 holds the container's stdout, which the same uid can open through /proc/1/fd/1: with a log
        # driver, what env code writes there would grow a log file on the host without bound.
        log_config=docker_sdk().types.LogConfig(type="none"),
    )


def remove(client: Any, container: str | None, volume: str | None, warn: bool = False, left: list[str] | None = None) -> list[str]:
    """Remove a sandbox's container (id or name), then its work volume and channels volume (if it has one); a
    line per thing removed, and a line per thing the daemon would not remove (with its reason) into ``left``.
    Never raises."""
    removed: list[str] = []
    if container:
        done, error = _retry(lambda: client.api.remove_container(container, force=True), 3, 0.2,
                             gone=("no such container", "is already in progress"))
        if done:
            removed.append(f"container {container}")
        elif error is not None:
            if warn:
                print(f"WARNING: sandbox container {container} could not be removed: {error}", file=sys.stderr)
            if left is not None:
                left.append(f"container {container} ({_first_line(error)})")
    for vol in (volume, channels_volume(volume)) if volume else ():
        # a volume stays in use until its container is gone: the daemon may still be settling
        done, error = _retry(lambda: client.api.remove_volume(vol, force=True), 5, 0.1, gone=("no such volume", "not found"))
        if done:
            removed.append(f"volume {vol}")
        elif error is not None and left is not None:
            left.append(f"volume {vol} ({_first_line(error)})")
    return removed


def _first_line(error: BaseException) -> str:
    return ((str(error).strip().splitlines() or [type(error).__name__])[0])[:200]


def _retry(call: Callable[[], object], attempts: int, pause_s: float, gone: tuple[str, ...]) -> tuple[bool, Exception | None]:
    """(True, None) once ``call`` succeeds; (False, None) when the daemon says it is gone already; else the last error."""
    error: Exception | None = None
    for _ in range(attempts):
        try:
            call()
            return True, None
        except Exception as exc:  # noqa: BLE001 - the daemon's errors are all "could not", with a reason
            if any(marker in str(exc).lower() for marker in gone):
                return False, None
            error = exc
            time.sleep(pause_s)
    return False, error


def remove_container_and_volume(container: str | None, volume: str | None, left: list[str] | None = None) -> list[str]:
    """Remove one sandbox's container and volumes by name (the reaper's Docker half); what the daemon would
    not remove goes to ``left``."""
    try:
        client = docker_sdk().from_env(timeout=60)
    except Exception:  # noqa: BLE001 - no daemon: nothing of ours can be running there either
        return []
    try:
        return remove(client, container, volume, left=left)
    finally:
        client.close()


def prune(left: list[str] | None = None) -> list[str]:
    """Remove sandbox containers and volumes (work, channels) whose creating process is gone (crashes,
    kill -9). Sandboxes of live processes - other users' tests, a long training run - are kept.
    What the daemon would not remove goes to ``left``, a line each with its reason."""
    client = docker_sdk().from_env(timeout=60)
    try:
        return _prune(client, left)
    finally:
        client.close()


def _prune(client: Any, left: list[str] | None = None) -> list[str]:
    removed = []
    for c in client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True):
        owner = c.labels.get(f"{LABEL}.owner")
        if owner and not owners.owner_alive(owner):
            removed += remove(client, c.name, c.name, left=left)
    live = {c.name for c in client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True)}
    volumes = [v for kind in ("work", "channels") for v in client.volumes.list(filters={"label": f"{LABEL}={kind}"})]
    for v in volumes:
        owner = (v.attrs.get("Labels") or {}).get(f"{LABEL}.owner")
        sandbox = v.name.removesuffix("-channels") if (v.attrs.get("Labels") or {}).get(LABEL) == "channels" else v.name
        if sandbox not in live and owner and not owners.owner_alive(owner):
            try:
                v.remove()
                removed.append(f"volume {v.name}")
            except Exception as exc:  # noqa: BLE001 - in use or racing with a starting sandbox
                if left is not None and "no such volume" not in str(exc).lower():
                    left.append(f"volume {v.name} ({_first_line(exc)})")
    return removed
