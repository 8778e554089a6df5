"""How a bwrap job is started: its mounts and command line, and what its launcher does in the forked child. Host side.

The command line builds an empty root: ``/usr`` (and the ``/lib*``, ``/bin`` links) read-only, ``/etc`` reduced to
``ld.so.cache`` plus a synthetic passwd/group, a fresh ``/proc`` and minimal ``/dev``, size-capped tmpfs ``/tmp``
and ``/dev/shm``, the interpreter prefix read-only at its real path, the trusted runtime read-only at
``/sandbox/runtime`` and the work dir read-write at ``/sandbox/work``. Every namespace is unshared (net: only a
down loopback), all capabilities dropped, no further user namespaces, a new session (no TTY injection), the
environment cleared, uid/gid 65534 inside.

The child set-up (:func:`child_setup`) runs as host root between fork and exec: a private mount namespace in
which an interpreter prefix the sandbox uid could not reach is bound onto a world-traversable stage dir, the
sandbox's cgroup, rlimits, then ``setuid`` to the sandbox's own uid.
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

_CLONE_NEWNS = 0x00020000
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
_libc.unshare.argtypes = [ctypes.c_int]


def system_binds() -> list[str]:
    """Read-only system dirs; merged-/usr links are recreated as links."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for f in ("/etc/ld.so.cache", "/etc/localtime", "/etc/nsswitch.conf"):
        if os.path.exists(f):
            args += ["--ro-bind", f, f]
    return args


def interpreter_binds(root: Path, as_root: bool) -> tuple[list[tuple[str, str]], list[str]]:
    """(stages, bwrap args) that bind the interpreter prefix read-only at its own path.

    Where the sandbox uid could not reach a prefix (e.g. pyenv under /root, mode 700), it is bound from a
    stage dir under ``root``, onto which :func:`child_setup` binds the prefix in a mount namespace private to
    the launch, so host mounts never change.
    """
    stages: list[tuple[str, str]] = []
    args: list[str] = []
    for i, path in enumerate(runtime.interpreter_paths()):
        if path == "/usr" or path.startswith("/usr/"):
            continue
        if as_root and not reachable_by_others(path):
            stage = root / f"stage{i}"
            stage.mkdir(mode=0o755)
            stages.append((path, str(stage)))
            args += ["--ro-bind", str(stage), path]
        else:
            args += ["--ro-bind", path, path]
    return stages, args


def reachable_by_others(path: str) -> bool:
    """Can a uid that is neither owner nor group traverse every directory down to ``path``?"""
    p = Path(path)
    for anc in [p, *p.parents]:
        try:
            if not os.stat(anc).st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def mount_tmpfs(target: Path, options: str) -> str | None:
    """Mount a private tmpfs with ``options`` (size, inodes, owner) on ``target``; None, or why it failed."""
    if _libc.mount(b"tmpfs", str(target).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode()) == 0:
        return None
    return os.strerror(ctypes.get_errno())


def command_line(
    bwrap: str,
    argv: list[str],
    *,
    runtime_dir: Path,
    work: Path,
    prefix_args: list[str],
    limits: SandboxLimits,
    hardened: bool,
    info_fd: int | None = None,
    seccomp_fd: int | None = None,
    as_pid_1: bool = False,
) -> list[str]:
    """The full bwrap command line that runs ``argv`` in the sandbox laid out by the other arguments.

    ``as_pid_1``: argv is the sandbox's pid 1 (no bwrap init process), for a worker's shim."""
    mb = 1024 * 1024
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
        *system_binds(),
        "--ro-bind", str(runtime_dir / "etc" / "passwd"), "/etc/passwd",
        "--ro-bind", str(runtime_dir / "etc" / "group"), "/etc/group",
        "--proc", "/proc",
        "--dev", "/dev",
        *(["--perms", "1777", "--size", str(limits.shm_mb * mb), "--tmpfs", "/dev/shm"] if hardened else []),
        "--perms", "1777", "--size", str(max(16, limits.file_size_mb) * mb), "--tmpfs", "/tmp",
        *prefix_args,
        "--ro-bind", str(runtime_dir / "python"), runtime.INSIDE_RUNTIME,
        "--bind", str(work), runtime.INSIDE_WORK,
        "--remount-ro", "/",  # the skeleton root (/etc, /root, /sandbox...) is read-only too
        "--chdir", runtime.INSIDE_WORK,
        "--clearenv",
    ]
    for k, v in environment().items():
        args += ["--setenv", k, v]
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    if as_pid_1:
        args.append("--as-pid-1")
    return [*args, "--", *argv]


def environment() -> dict[str, str]:
    """The whole environment of a process inside (``--clearenv`` drops the rest)."""
    return host_env_allowlist(runtime.INSIDE_WORK, runtime.INSIDE_RUNTIME, runtime.search_path())


def child_setup(
    limits: SandboxLimits,
    *,
    stages: list[tuple[str, str]],
    cgroup: cgroups.Cgroup | None,
    as_root: bool,
    uid: int,
    gid: int,
    die_with_us: bool = False,
) -> Callable[[], None]:
    """The ``preexec_fn`` that launches one job: everything it needs is computed here, in the parent."""
    stages = list(stages)
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
        if stages:
            if libc.unshare(_CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
            if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
                raise OSError(ctypes.get_errno(), "making / private failed")
            for src, stage in stages:
                if libc.mount(src.encode(), stage.encode(), None, _MS_BIND | _MS_REC, None) != 0:
                    raise OSError(ctypes.get_errno(), f"bind {src} failed")
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
