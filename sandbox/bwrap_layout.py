"""What a bwrap sandbox sees of the file system, and how each launch puts it together. Host side.

As root, every launch runs in a private mount namespace of its own (:func:`sandbox.bwrap_command.child_setup`)
in which the launcher, still root, mounts on stage dirs under the sandbox's root:

- ``python``: the interpreter's prefix as an overlay whose top layer (:func:`sandbox.runtime.site_layer`) replaces
  its package dirs with one holding only jsonschema and its requirements; shown inside at ``/sandbox/python``.
  The host's other packages, its editable install and the checkout it names are not there;
- ``runtime``: the content-addressed runtime (``trace_env`` and the worker protocol) as an overlay too;
- ``tmp`` and ``shm``: tmpfs capped in bytes AND inodes (bwrap's own ``--tmpfs`` takes no inode cap).

The overlays' layers are named to the kernel as ``/proc/self/fd/N`` of directories opened by the launcher, and
/etc's few files are copied in (``--file``), so ``/proc/self/mountinfo`` inside names no host path: only the
standard system dirs (``/usr``...) and ``/proc/self/fd/N``. The mounts end with the launch's namespace.

Without root none of this can be mounted: the interpreter prefix and the runtime are bound at their host paths
(the sandbox's ``warning`` says what that leaves: host packages visible, no inode caps on /tmp and /dev/shm). As
root without an overlay layer, the same, with an interpreter dir the sandbox uid cannot reach bound from a stage.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sandbox import runtime
from sandbox.base import SandboxLimits

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC = 1, 2, 4, 4096, 16384
#: /etc files copied into the sandbox (only those that exist on the host).
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/nsswitch.conf")


@dataclass
class Mount:
    """One mount(2) call for the launcher child, as bytes computed in the parent. For an overlay, ``layers`` are
    the lower dirs: the child opens them once in its own mount namespace (overlayfs refuses layers reached
    through another namespace) and names them as ``/proc/self/fd/N``."""

    source: bytes
    target: bytes
    fstype: bytes
    flags: int
    data: bytes
    layers: tuple[bytes, ...] = ()


@dataclass
class LaunchPlan:
    """The fds one launch needs (layer dirs, /etc files) and what to do with them; close() after the spawn."""

    mounts: list[Mount] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)  # inside path -> fd bwrap copies it from
    fds: list[int] = field(default_factory=list)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return tuple(self.files.values())

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds.clear()


@dataclass
class Layout:
    """Where a bwrap sandbox's pieces come from. ``staged``: the root-only layout above; else plain binds."""

    root: Path
    runtime_dir: Path
    limits: SandboxLimits
    hardened: bool
    staged: bool
    uid: int
    gid: int
    prefix: str = field(default_factory=runtime.interpreter_prefix)
    site_layer: Path | None = None
    #: Unstaged as root: interpreter dirs the sandbox uid cannot reach (pyenv under /root), bound onto stage dirs.
    binds: list[tuple[str, str]] = field(default_factory=list)

    @property
    def inside_prefix(self) -> str:
        return "/usr" if self.prefix == "/usr" else runtime.INSIDE_PYTHON

    def prepare(self, as_root: bool) -> None:
        """Make the stage dirs (at open, as root) and the site layer."""
        if self.staged:
            self.site_layer = runtime.site_layer()
            for name in ("python", "runtime", "tmp", "shm"):
                (self.root / name).mkdir(mode=0o755, exist_ok=True)
            return
        for i, path in enumerate(runtime.interpreter_paths()):
            if as_root and not path.startswith("/usr") and not runtime.reachable_by_others(path):
                stage = self.root / f"stage{i}"
                stage.mkdir(mode=0o755, exist_ok=True)
                self.binds.append((path, str(stage)))

    def plan(self) -> LaunchPlan:
        """Open what one launch needs. Raise nothing half-done: on error every fd opened is closed."""
        plan = LaunchPlan()
        plan.mounts += [Mount(src.encode(), stage.encode(), b"none", MS_BIND | MS_REC, b"") for src, stage in self.binds]
        try:
            if self.staged:
                self._stage(plan)
                for dest, source in (("/etc/passwd", self.runtime_dir / "etc" / "passwd"),
                                     ("/etc/group", self.runtime_dir / "etc" / "group"),
                                     *((f, Path(f)) for f in ETC_FILES if os.path.exists(f))):
                    fd = os.open(source, os.O_RDONLY)
                    plan.fds.append(fd)
                    plan.files[dest] = fd
        except BaseException:
            plan.close()
            raise
        return plan

    def _stage(self, plan: LaunchPlan) -> None:
        assert self.site_layer is not None
        layers = {"python": (self.site_layer, Path(self.prefix)),
                  "runtime": (self.runtime_dir / "python", runtime.empty_dir())}
        for name, dirs in layers.items():
            plan.mounts.append(Mount(b"overlay", str(self.root / name).encode(), b"overlay", MS_RDONLY | MS_NOSUID | MS_NODEV,
                                     b"lowerdir=", tuple(str(d).encode() for d in dirs)))
        if self.hardened:
            lim = self.limits
            for name, size_mb in (("tmp", max(16, lim.file_size_mb)), ("shm", lim.shm_mb)):
                opts = f"size={size_mb}m,nr_inodes={lim.tmpfs_inodes},mode=1777,uid={self.uid},gid={self.gid}"
                plan.mounts.append(Mount(b"tmpfs", str(self.root / name).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts.encode()))

    # -- bwrap arguments -----------------------------------------------------------------------------------
    def args(self, plan: LaunchPlan) -> list[str]:
        """The bwrap arguments that lay out /usr, /etc, /tmp, /dev/shm, the interpreter and the runtime."""
        mb = 1024 * 1024
        lim = self.limits
        args = system_binds(skip_usr=self.staged and self.inside_prefix == "/usr")
        if self.staged:
            for dest, fd in plan.files.items():
                args += ["--file", str(fd), dest]
        else:
            args += ["--ro-bind", str(self.runtime_dir / "etc" / "passwd"), "/etc/passwd",
                     "--ro-bind", str(self.runtime_dir / "etc" / "group"), "/etc/group"]
            args += [a for f in ETC_FILES if os.path.exists(f) for a in ("--ro-bind", f, f)]
        args += ["--proc", "/proc", "--dev", "/dev"]
        if self.staged and self.hardened:
            args += ["--bind", str(self.root / "shm"), "/dev/shm", "--bind", str(self.root / "tmp"), "/tmp"]
        else:
            if self.hardened:
                args += ["--perms", "1777", "--size", str(lim.shm_mb * mb), "--tmpfs", "/dev/shm"]
            args += ["--perms", "1777", "--size", str(max(16, lim.file_size_mb) * mb), "--tmpfs", "/tmp"]
        if self.staged:
            args += ["--ro-bind", str(self.root / "python"), self.inside_prefix,
                     "--ro-bind", str(self.root / "runtime"), runtime.INSIDE_RUNTIME]
        else:
            staged_from = {path: stage for path, stage in self.binds}
            args += [a for path in runtime.interpreter_paths() if not (path == "/usr" or path.startswith("/usr/"))
                     for a in ("--ro-bind", staged_from.get(path, path), path)]
            args += ["--ro-bind", str(self.runtime_dir / "python"), runtime.INSIDE_RUNTIME]
        return args

    def environment(self) -> dict[str, str]:
        """PATH (and LD_LIBRARY_PATH where the interpreter was moved) for a process inside."""
        if not self.staged:
            return {"PATH": runtime.search_path()}
        env = {"PATH": ":".join([f"{self.inside_prefix}/bin", "/usr/local/bin", "/usr/bin", "/bin"])}
        if self.inside_prefix != self.prefix and any(n.startswith("libpython") for n in _listdir(Path(self.prefix) / "lib")):
            env["LD_LIBRARY_PATH"] = f"{self.inside_prefix}/lib"  # the interpreter's RUNPATH names its host prefix
        return env


def system_binds(skip_usr: bool = False) -> list[str]:
    """Read-only system dirs; merged-/usr links are recreated as links."""
    args = [] if skip_usr else ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def can_stage() -> bool:
    """Staging needs root (mounts in the launcher's own namespace) and Linux."""
    return os.geteuid() == 0 and sys.platform.startswith("linux")
