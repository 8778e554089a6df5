"""How a bwrap job is started: its command line, and what its launcher does in the forked child. Host side.

The command line builds an empty root: ``/usr`` (and the ``/lib*``, ``/bin`` links) read-only, ``/etc`` reduced to
copies of ``ld.so.cache`` and friends plus a synthetic passwd/group, a fresh ``/proc`` and minimal ``/dev``, tmpfs
``/tmp`` and ``/dev/shm`` capped in bytes and inodes, the interpreter at ``/sandbox/python`` with only the packages
the inside half needs, the trusted runtime read-only at ``/sandbox/runtime`` and the work dir read-write at
``/sandbox/work`` (:mod:`sandbox.bwrap_layout` says where each comes from). Every namespace is unshared (net: only
a down loopback), all capabilities dropped, no further user namespaces, a new session (no TTY injection), the
environment cleared, uid/gid 65534 inside.

The child set-up (:func:`child_setup`) runs as host root between fork and exec: a private mount namespace for the
launch in which the layout's overlays and tmpfs are mounted, the sandbox's cgroup, rlimits, then ``setuid`` to
the sandbox's own uid.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path
from typing import Callable

from sandbox import cgroups, procfs, runtime
from sandbox._proc import set_rlimits
from sandbox.base import SandboxLimits, host_env_allowlist
from sandbox.bwrap_layout import LaunchPlan, Layout, Mount

_CLONE_NEWNS = 0x00020000
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_PR_SET_PDEATHSIG = 1
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
_libc.unshare.argtypes = [ctypes.c_int]


def mount_tmpfs(target: Path, options: str) -> str | None:
    """Mount a private tmpfs with ``options`` (size, inodes, owner) on ``target``; None, or why it failed."""
    if _libc.mount(b"tmpfs", str(target).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode()) == 0:
        return None
    return os.strerror(ctypes.get_errno())


def command_line(
    bwrap: str,
    argv: list[str],
    *,
    layout: Layout,
    plan: LaunchPlan,
    work: Path,
    info_fd: int | None = None,
    seccomp_fd: int | None = None,
    as_pid_1: bool = False,
) -> list[str]:
    """The full bwrap command line that runs ``argv`` in the sandbox laid out by ``layout`` (this launch: ``plan``).

    ``as_pid_1``: argv is the sandbox's pid 1 (no bwrap init process), for a worker's shim."""
    args = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop", "ALL",
        "--uid", str(runtime.SANDBOX_UID),
        "--gid", str(runtime.SANDBOX_GID),
        "--hostname", "sandbox",
        *layout.args(plan),
        "--bind", str(work), runtime.INSIDE_WORK,
        "--remount-ro", "/",  # the skeleton root (/etc, /root, /sandbox...) is read-only too
        "--chdir", runtime.INSIDE_WORK,
        "--clearenv",
    ]
    for k, v in environment(layout).items():
        args += ["--setenv", k, v]
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    if as_pid_1:
        args.append("--as-pid-1")
    return [*args, "--", *argv]


def environment(layout: Layout) -> dict[str, str]:
    """The whole environment of a process inside (``--clearenv`` drops the rest)."""
    env = host_env_allowlist(runtime.INSIDE_WORK, runtime.INSIDE_RUNTIME, "")
    env.update(layout.environment())
    return env


def child_setup(
    limits: SandboxLimits,
    *,
    mounts: list[Mount],
    cgroup: cgroups.Cgroup | None,
    as_root: bool,
    uid: int,
    gid: int,
    die_with_us: bool = False,
) -> Callable[[], None]:
    """The ``preexec_fn`` that launches one job: everything it needs is computed here, in the parent."""
    mounts = list(mounts)
    procs_files = cgroup.procs_files() if cgroup is not None else []
    join = cgroups.join
    parent = os.getpid()
    if not as_root:
        # Without root we cannot switch to a private uid, and RLIMIT_NPROC counts every process
        # of the invoking user (the user-namespace creator's limit caps the whole user). Grant
        # the sandbox its budget on top of what the user already runs: weaker, documented.
        limits = limits.model_copy(update={"max_processes": limits.max_processes + len(procfs.of_uid(uid))})
    libc = _libc

    def fn() -> None:  # runs in the forked child: no locks, no imports
        if mounts:  # a mount namespace of this launch's own: what is mounted here ends with it
            if libc.unshare(_CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
            if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
                raise OSError(ctypes.get_errno(), "making / private failed")
            for m in mounts:
                fds = [os.open(layer, _O_DIR) for layer in m.layers]
                data = m.data + b":".join(b"/proc/self/fd/%d" % fd for fd in fds)
                failed = libc.mount(m.source, m.target, m.fstype, m.flags, data) != 0
                errno = ctypes.get_errno()
                for fd in fds:
                    os.close(fd)
                if failed:
                    raise OSError(errno, f"mounting {m.fstype.decode()} on {m.target.decode()} failed")
        if procs_files:
            join(procs_files)  # before setuid: only root may move a process into the group
        set_rlimits(limits)
        if as_root:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        if die_with_us:
            # If this process dies mid-exec, the job dies too (set after setuid, which clears
            # it). Not for workers: the signal fires when the *thread* that forked exits; a
            # worker instead ends when its stdin closes.
            libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)
            if os.getppid() != parent:
                os._exit(1)

    return fn
