"""bubblewrap backend: namespaces + a throwaway, non-root host uid + rlimits. The default.

What one exec looks like (host side, as root):

1. fork; in the child (``preexec``): a private mount namespace in which the interpreter prefix
   (under ``/root``, mode 700) is bind-mounted onto an empty, world-traversable stage dir; rlimits
   (CPU, address space, file size, processes, no core dumps); then ``setuid`` to a fresh uid drawn
   per sandbox (nobody else on the host has it).
2. exec ``bwrap`` as that uid. It builds an empty root: ``/usr`` (and the ``/lib*``, ``/bin``
   links) read-only, ``/etc`` reduced to ``ld.so.cache`` plus a synthetic passwd/group, a fresh
   ``/proc`` and minimal ``/dev``, a size-capped tmpfs ``/tmp``, the interpreter prefix read-only
   at its real path, the trusted runtime read-only at ``/sandbox/runtime``, and the work dir
   read-write at ``/sandbox/work``. Every namespace is unshared (net: only a down loopback), all
   capabilities dropped, no further user namespaces, a new session (no TTY injection), the
   environment cleared, uid/gid 65534 inside.

Why a real non-root host uid: the kernel does not enforce RLIMIT_NPROC for host root, and a uid
that maps to host root stays root for whatever escapes. A distinct uid per sandbox also keeps
sandboxes from signalling or reading each other, and gives each its own process budget.

When the main process ends, bwrap's pid 1 ends and the kernel kills every process left in the
sandbox's pid namespace: double-forked daemons do not outlive an exec.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import uuid

from sandbox import cgroups, leftovers, runtime, syscalls
from sandbox._proc import ProcessChannel, _killpg, run_job, spawn
from sandbox.base import (
    Channel,
    ExecResult,
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

INSIDE_WORK = "/sandbox/work"
INSIDE_RUNTIME = "/sandbox/runtime"

_CLONE_NEWNS = 0x00020000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
_libc.unshare.argtypes = [ctypes.c_int]

# uids handed to sandboxes: far above anything a distro allocates, below the 16-bit overflow id.
_UID_BASE, _UID_SPAN = 1_500_000, 1_000_000


def _alloc_uid() -> int:
    return _UID_BASE + random.randrange(_UID_SPAN)


def _bwrap_path() -> str | None:
    return shutil.which("bwrap")


def set_rlimits(limits: SandboxLimits) -> None:
    """Apply the per-process limits (runs in the forked child, before exec)."""
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_mb * mb, limits.file_size_mb * mb))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _system_binds() -> list[str]:
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


class BwrapSandbox(Sandbox):
    backend = "bwrap"

    def __init__(self, limits: SandboxLimits | None = None):
        super().__init__(limits)
        self.bwrap = _bwrap_path()
        if self.bwrap is None:
            raise SandboxUnavailable("bwrap not found: apt-get install bubblewrap (or run scripts/sandbox-services.sh)")
        self._root: Path | None = None
        self._work: Path | None = None
        self._procs: set[subprocess.Popen] = set()
        self._procs_lock = threading.Lock()
        self._as_root = os.geteuid() == 0
        self.uid = _alloc_uid() if self._as_root else os.getuid()
        self.gid = self.uid if self._as_root else os.getgid()
        self._stages: list[tuple[str, str]] = []  # (host source, stage dir) bound in preexec
        self._prefix_args: list[str] = []
        self._runtime: Path | None = None
        self.name = f"trace-sbx-{uuid.uuid4().hex[:12]}"
        self.cgroup: cgroups.Cgroup | None = None
        self._seccomp: str | None = None
        self._lease: leftovers.Lease | None = None

    @property
    def workdir(self) -> str:
        return INSIDE_WORK

    @property
    def host_workdir(self) -> Path:
        """The work dir on the host (for the trusted side to read results)."""
        if self._work is None:
            raise SandboxError("sandbox is not open")
        return self._work

    # -- lifecycle -----------------------------------------------------------------------------------
    def open(self) -> None:
        if self._opened:
            return
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        self._runtime = runtime.host_runtime()
        root = Path(tempfile.gettempdir()) / self.name
        self._lease = leftovers.Lease(self.name, self.backend, root=str(root))
        self._opened = True  # from here on close() has something to undo
        root.mkdir(mode=0o711)
        self._root = root
        os.chmod(self._root, 0o711)  # the sandbox uid may traverse, not list
        self._work = self._root / "work"
        self._work.mkdir(mode=0o700)
        self.warning = self._set_limits() if self.hardened else None
        if self._as_root:
            os.chown(self._work, self.uid, self.gid)
        # The interpreter prefix, bound read-only at its own path. If the sandbox uid could not
        # reach it (e.g. pyenv under /root, mode 700), it is first bound onto a stage dir inside a
        # mount namespace private to the launch, so host mounts never change.
        for i, path in enumerate(runtime.interpreter_paths()):
            if path == "/usr" or path.startswith("/usr/"):
                continue
            if self._as_root and not self._reachable_by_others(path):
                stage = self._root / f"stage{i}"
                stage.mkdir(mode=0o755)
                self._stages.append((path, str(stage)))
                self._prefix_args += ["--ro-bind", str(stage), path]
            else:
                self._prefix_args += ["--ro-bind", path, path]

    def _set_limits(self) -> str | None:
        """Work dir tmpfs, cgroup and seccomp filter; returns one line naming what could not be set."""
        assert self._work is not None and self._lease is not None and self._runtime is not None
        missing: list[str] = []
        lim = self.limits
        if self._as_root:
            opts = f"size={lim.workdir_mb}m,nr_inodes={lim.workdir_inodes},mode=0700,uid={self.uid},gid={self.gid}"
            if _libc.mount(b"tmpfs", str(self._work).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts.encode()) == 0:
                self._lease.update(mount=str(self._work))
            else:
                missing.append(f"work dir size cap (mount tmpfs: {os.strerror(ctypes.get_errno())})")
        else:
            missing.append("work dir size cap (needs root)")
        self.cgroup, why = cgroups.create(self.name, lim)
        if self.cgroup is not None:
            self._lease.update(cgroups=self.cgroup.dirs, cgroup_version=self.cgroup.version)
        else:
            missing.append(f"per-sandbox memory/process/CPU limits ({why})")
        self._seccomp, why = syscalls.bpf_file(str(self._runtime.parent / "seccomp"))
        if self._seccomp is None:
            missing.append(f"syscall filter ({why})")
        return ("limits not enforced on this host: " + "; ".join(missing)) if missing else None

    @staticmethod
    def _reachable_by_others(path: str) -> bool:
        p = Path(path)
        for anc in [p, *p.parents]:
            try:
                if not os.stat(anc).st_mode & 0o001:
                    return False
            except OSError:
                return False
        return True

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_workers()
        with self._procs_lock:
            procs = list(self._procs)
            self._procs.clear()
        for p in procs:
            _killpg(p.pid)
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.cgroup is not None:
            self.cgroup.kill_all()
        if self._as_root and self._opened:
            self._kill_uid_leftovers()
        if self._lease is not None:
            leftovers.release_resources(self._lease.data)  # cgroup, work dir mount, root dir
            self._lease.release()

    def _kill_uid_leftovers(self) -> None:
        """Belt and braces: no process of this sandbox's private uid may survive close()."""
        for pid in _pids_of_uid(self.uid):
            try:
                os.kill(pid, 9)
            except OSError:
                pass

    # -- launching -------------------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        path = ":".join([*runtime.python_bin_dirs(), "/usr/local/bin", "/usr/bin", "/bin"])
        return host_env_allowlist(INSIDE_WORK, INSIDE_RUNTIME, path)

    def bwrap_argv(self, argv: list[str], info_fd: int | None = None, seccomp_fd: int | None = None) -> list[str]:
        """The full bwrap command line for argv (exposed for tests and debugging)."""
        assert self._work is not None and self._runtime is not None
        mb = 1024 * 1024
        args = [
            self.bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--cap-drop", "ALL",
            "--uid", str(runtime.SANDBOX_UID),
            "--gid", str(runtime.SANDBOX_GID),
            "--hostname", "sandbox",
            *_system_binds(),
            "--ro-bind", str(self._runtime / "etc" / "passwd"), "/etc/passwd",
            "--ro-bind", str(self._runtime / "etc" / "group"), "/etc/group",
            "--proc", "/proc",
            "--dev", "/dev",
            *(["--perms", "1777", "--size", str(self.limits.shm_mb * mb), "--tmpfs", "/dev/shm"] if self.hardened else []),
            "--perms", "1777", "--size", str(max(16, self.limits.file_size_mb) * mb), "--tmpfs", "/tmp",
            *self._prefix_args,
            "--ro-bind", str(self._runtime / "python"), INSIDE_RUNTIME,
            "--bind", str(self._work), INSIDE_WORK,
            "--remount-ro", "/",  # the skeleton root (/etc, /root, /sandbox...) is read-only too
            "--chdir", INSIDE_WORK,
            "--clearenv",
        ]
        for k, v in self._env().items():
            args += ["--setenv", k, v]
        if info_fd is not None:
            args += ["--info-fd", str(info_fd)]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        return [*args, "--", *argv]

    def _preexec(self, die_with_us: bool = False):  # type: ignore[no-untyped-def]
        limits, stages, as_root, uid, gid = self.limits, list(self._stages), self._as_root, self.uid, self.gid
        procs_files = self.cgroup.procs_files() if self.cgroup is not None else []
        join = cgroups.join
        parent = os.getpid()
        if not as_root:
            # Without root we cannot switch to a private uid, and RLIMIT_NPROC counts every process
            # of the invoking user (the user-namespace creator's limit caps the whole user). Grant
            # the sandbox its budget on top of what the user already runs: weaker, documented.
            limits = limits.model_copy(update={"max_processes": limits.max_processes + len(_pids_of_uid(uid))})
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

    @staticmethod
    def _reap(proc: subprocess.Popen, deadline_s: float = 5.0) -> None:
        """SIGKILL every process in the job's pid namespace and wait until none is left.

        bwrap's outer process reports the job's exit as soon as the main command ends, while the
        kernel may still be tearing down the namespace (killing daemonised children). Waiting
        here makes "nothing outlives exec" hold the moment exec returns, not a moment later.
        """
        ns = getattr(proc, "_sbx_pidns", None)
        if ns is None:
            _killpg(proc.pid)
            return
        pid1 = getattr(proc, "_sbx_pid1", None)
        if pid1 is not None and not _alive(pid1):
            return  # pid 1 only finishes exiting after the kernel killed the whole namespace
        deadline = time.monotonic() + deadline_s
        while True:
            left = _pids_in_ns(ns)
            if not left or time.monotonic() > deadline:
                return
            for pid in left:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            time.sleep(0.002)

    def _launch(self, argv: list[str], stdin: bool, die_with_us: bool = False) -> subprocess.Popen:
        self._check_open()
        assert self._root is not None
        info_r, info_w = os.pipe()
        seccomp_fd = os.open(self._seccomp, os.O_RDONLY) if self._seccomp else None
        try:
            proc = spawn(
                self.bwrap_argv(argv, info_fd=info_w, seccomp_fd=seccomp_fd), cwd=str(self._root),
                env={"PATH": "/usr/bin:/bin"}, preexec_fn=self._preexec(die_with_us), stdin=stdin,
                pass_fds=(info_w,) if seccomp_fd is None else (info_w, seccomp_fd),
            )
        except BaseException:
            os.close(info_r)
            raise
        finally:
            os.close(info_w)
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        with self._procs_lock:
            self._procs.add(proc)
        try:
            info = _read_info(info_r)
        finally:
            os.close(info_r)
        pid1 = info.get("child-pid")
        if isinstance(pid1, int):
            proc._sbx_pid1 = pid1  # type: ignore[attr-defined]
            try:
                proc._sbx_pidns = os.readlink(f"/proc/{pid1}/ns/pid")  # type: ignore[attr-defined]
            except OSError:  # already gone (e.g. `true`): nothing to reap later
                proc._sbx_pidns = None  # type: ignore[attr-defined]
        return proc

    def _forget(self, proc: subprocess.Popen) -> None:
        with self._procs_lock:
            self._procs.discard(proc)

    # -- interface -------------------------------------------------------------------------------------
    def put_files(self, files: dict[str, bytes | str]) -> None:
        self._check_open()
        assert self._work is not None
        for rel, data in files.items():
            norm = normalize_relpath(rel)
            dest = self._work / norm
            # refuse to follow links the sandbox may have planted in the work dir
            cur = self._work
            for part in Path(norm).parts[:-1]:
                cur = cur / part
                if cur.is_symlink():
                    raise SandboxError(f"refusing to write through a symlink: {rel!r}")
                if not cur.exists():
                    cur.mkdir(mode=0o755)
                    if self._as_root:
                        os.chown(cur, self.uid, self.gid)
            if dest.is_symlink():
                dest.unlink()
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(as_bytes(data))
            if self._as_root:
                os.chown(dest, self.uid, self.gid)

    def exec(
        self,
        argv: list[str],
        timeout_s: float | None = None,
        output_cap: int | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        started = time.monotonic()
        proc = self._launch(check_argv(argv), stdin=stdin is not None, die_with_us=True)
        try:
            return run_job(
                proc, stdin_data=stdin, timeout_s=default_timeout(self.limits, timeout_s),
                output_cap=default_cap(self.limits, output_cap), started=started, exit_code_of=_bwrap_exit,
                kill=lambda: self._reap(proc),
            )
        finally:
            self._reap(proc)  # stragglers of the namespace teardown, if any
            self._forget(proc)

    def _spawn_worker(self, argv: list[str]) -> Channel:
        proc = self._launch(argv, stdin=True)

        def kill() -> None:
            self._reap(proc)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _killpg(proc.pid)
            self._forget(proc)

        return ProcessChannel(proc, kill=kill)


def _bwrap_exit(rc: int) -> tuple[int | None, str | None]:
    """bwrap exits 128+N when the sandboxed process died of signal N."""
    import signal

    if rc < 0:
        try:
            return None, f"signal:{signal.Signals(-rc).name}"
        except ValueError:
            return None, f"signal:{-rc}"
    if 128 < rc < 128 + 65:
        try:
            name = signal.Signals(rc - 128).name
        except ValueError:
            return rc, None
        return rc, f"signal:{name}"
    return rc, None


def _read_info(fd: int, timeout_s: float = 30.0) -> dict:
    """Read bwrap's --info-fd JSON (it holds the host pid of the sandbox's pid 1)."""
    import json
    import select

    buf = b""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
        try:
            return json.loads(buf)
        except ValueError:
            continue
    try:
        return json.loads(buf) if buf else {}
    except ValueError:
        return {}


def _alive(pid: int) -> bool:
    """True unless the process is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] not in (b"Z", b"X")


def _pids_in_ns(ns: str) -> list[int]:
    """Live (non-zombie) processes in the pid namespace ``ns`` (as read from /proc/PID/ns/pid)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") != ns:
                    continue
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
                if stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] in (b"Z", b"X"):
                    continue  # exited, waiting to be reaped by its parent: harmless
                pids.append(int(entry))
            except (OSError, ValueError):
                continue
    return pids


def _pids_of_uid(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(int(entry))
                        break
        except OSError:
            continue
    return pids


_probe_lock = threading.Lock()
_probe_result: dict[str, str | None] = {}


def probe(refresh: bool = False) -> str | None:
    """None if bwrap sandboxes work here (runs ``true`` inside one, once), else a one-line reason."""
    with _probe_lock:
        if "r" in _probe_result and not refresh:
            return _probe_result["r"]
        if _bwrap_path() is None:
            reason: str | None = "bwrap not installed (apt-get install bubblewrap, or run scripts/sandbox-services.sh)"
        else:
            try:
                with BwrapSandbox(SandboxLimits(wall_timeout_s=20)) as sb:
                    r = sb.exec(["true"])
                reason = None if r.exit_code == 0 else f"bwrap probe failed (exit {r.exit_code}): {r.stderr.strip()[:200]}"
            except Exception as e:  # noqa: BLE001 - any failure means "not usable", with the reason
                reason = f"bwrap probe failed: {type(e).__name__}: {e}"[:300]
        _probe_result["r"] = reason
        return reason


if __name__ == "__main__":  # pragma: no cover - manual debugging aid
    with BwrapSandbox() as sb:
        res = sb.exec(sys.argv[1:] or ["python", "-c", "print('hello from bwrap')"])
        print(res.model_dump_json(indent=2))
