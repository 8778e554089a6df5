"""bubblewrap backend: namespaces + a throwaway, non-root host uid + rlimits, a cgroup and a syscall filter. Host side.

What one exec looks like (host side, as root): fork; in the child, the set-up of :mod:`sandbox.bwrap_command`
(private mount namespace for the interpreter prefix, cgroup, rlimits, ``setuid`` to a fresh uid drawn per
sandbox, which nobody else on the host has); then exec ``bwrap`` as that uid with the command line built
there. :mod:`sandbox.bwrap_jobs` starts the job and ends everything in its pid namespace.

Why a real non-root host uid: the kernel does not enforce RLIMIT_NPROC for host root, and a uid
that maps to host root stays root for whatever escapes. A distinct uid per sandbox also keeps
sandboxes from signalling or reading each other, and gives each its own process budget.

When the main process ends, bwrap's pid 1 ends and the kernel kills every process left in the
sandbox's pid namespace: double-forked daemons do not outlive an exec.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

from sandbox import budget, bwrap_command, cgroups, leftovers, procfs, runtime, syscalls, uids
from sandbox._proc import ProcessChannel, ProcessSet, run_job
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
    exit_status,
    normalize_relpath,
)
from sandbox.bwrap_jobs import Job, launch
from sandbox.bwrap_layout import LaunchPlan, Layout, can_stage

def _bwrap_path() -> str | None:
    return shutil.which("bwrap")


class BwrapSandbox(Sandbox):
    backend = "bwrap"

    def __init__(self, limits: SandboxLimits | None = None):
        super().__init__(limits)
        self.bwrap = _bwrap_path()
        if self.bwrap is None:
            raise SandboxUnavailable("bwrap not found: apt-get install bubblewrap (or run scripts/sandbox-services.sh)")
        self._root: Path | None = None
        self._work: Path | None = None
        self._procs = ProcessSet()
        self._as_root = os.geteuid() == 0
        #: As root, a private uid held from open() to the end of close() (:mod:`sandbox.uids`): no other live
        #: sandbox on this host runs as it.
        self.uid, self.gid = os.getuid(), os.getgid()
        self._uid_hold: uids.UidHold | None = None
        self._layout: Layout | None = None
        self._runtime: Path | None = None
        self.name = f"trace-sbx-{uuid.uuid4().hex[:12]}"
        self.cgroup: cgroups.Cgroup | None = None
        self._seccomp: str | None = None
        self._lease: leftovers.Lease | None = None

    @property
    def workdir(self) -> str:
        return runtime.INSIDE_WORK

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
        if self._as_root:
            try:
                self._uid_hold = uids.allocate()
            except RuntimeError as exc:
                raise SandboxError(str(exc)) from None
            self.uid = self.gid = self._uid_hold.uid
        self._runtime = runtime.host_runtime()
        try:  # as root, bwrap runs as the sandbox's own uid, which must traverse every dir down to the root dir
            parent = runtime.sandbox_parent_dir() if self._as_root else Path(tempfile.gettempdir())
        except runtime.NoReachableDir as exc:
            raise SandboxError(str(exc)) from None
        root = parent / self.name
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
        self._layout = Layout(self._root, self._runtime, self.limits, self.hardened, staged=can_stage(),
                              uid=self.uid, gid=self.gid)
        why_not = None if self._layout.staged else "needs root"
        try:
            self._layout.prepare(self._as_root)
        except OSError as exc:  # no overlay layer here (e.g. no trusted xattrs): bind as without root
            self._layout.staged, why_not = False, f"interpreter layer: {exc}"
            self._layout.prepare(self._as_root)
        if why_not is not None:
            self.warning = "; ".join(filter(None, [self.warning, f"host packages visible and no inode cap on /tmp "
                                                   f"and /dev/shm ({why_not})"]))

    def _set_limits(self) -> str | None:
        """Work dir tmpfs, cgroup and seccomp filter; returns one line naming what could not be set."""
        assert self._work is not None and self._lease is not None and self._runtime is not None
        missing: list[str] = []
        lim = self.limits
        if self._as_root:
            opts = f"size={lim.workdir_mb}m,nr_inodes={lim.workdir_inodes},mode=0700,uid={self.uid},gid={self.gid}"
            self._lease.update(mount=str(self._work))  # before mounting: a kill in between must not hide the mount
            why = bwrap_command.mount_tmpfs(self._work, opts)
            if why is not None:
                missing.append(f"work dir size cap (mount tmpfs: {why})")
        else:
            missing.append("work dir size cap (needs root)")
        lease = self._lease
        self.cgroup, why = cgroups.create(self.name, lim, announce=lambda cg: lease.update(cgroups=cg.dirs, cgroup_version=cg.version))
        if self.cgroup is None:
            missing.append(f"per-sandbox memory/process/CPU limits ({why})")
        elif self.cgroup.note:
            missing.append(self.cgroup.note)
        files = budget.host_budget().files_per_task
        if lim.open_files > files:  # all sandboxes together may hold at most the budget's open files
            self.limits = lim = lim.model_copy(update={"open_files": files})
        self._seccomp, why = syscalls.bpf_file(str(self._runtime.parent / "seccomp"))
        if self._seccomp is None:
            missing.append(f"syscall filter ({why})")
        return ("limits not enforced on this host: " + "; ".join(missing)) if missing else None

    def _teardown(self) -> None:
        self._procs.kill_all()
        if self.cgroup is not None:
            self.cgroup.kill_all()
        if self._as_root and self._opened:
            self._kill_uid_leftovers()
        if self._lease is not None:
            leftovers.release_resources(self._lease.data)  # cgroup, work dir mount, root dir
            self._lease.release()
        if self._uid_hold is not None:
            self._uid_hold.release()  # last: nothing runs as the uid any more

    def _kill_uid_leftovers(self) -> None:
        """Belt and braces: no process of this sandbox's private uid may survive close() (the uid is held by
        this sandbox alone, so these are its own)."""
        for pid in procfs.of_uid(self.uid):
            try:
                os.kill(pid, 9)
            except OSError:
                pass

    # -- launching -------------------------------------------------------------------------------------
    def bwrap_argv(self, argv: list[str], info_fd: int | None = None, seccomp_fd: int | None = None,
                   as_pid_1: bool = False, plan: LaunchPlan | None = None) -> list[str]:
        """The full bwrap command line for argv (exposed for tests and debugging)."""
        assert self._work is not None and self._layout is not None and self.bwrap is not None
        return bwrap_command.command_line(
            self.bwrap, argv, layout=self._layout, plan=plan or LaunchPlan(), work=self._work, info_fd=info_fd,
            seccomp_fd=seccomp_fd, as_pid_1=as_pid_1,
        )

    def _launch(self, argv: list[str], stdin: bool, die_with_us: bool = False, as_pid_1: bool = False) -> Job:
        self._check_open()
        assert self._root is not None and self._layout is not None
        plan = self._layout.plan()
        try:
            setup = bwrap_command.child_setup(
                self.limits, mounts=plan.mounts, cgroup=self.cgroup, as_root=self._as_root, uid=self.uid, gid=self.gid,
                die_with_us=die_with_us,
            )
            return launch(
                lambda info_fd, seccomp_fd: self.bwrap_argv(argv, info_fd=info_fd, seccomp_fd=seccomp_fd, as_pid_1=as_pid_1,
                                                            plan=plan),
                cwd=str(self._root), preexec_fn=setup, stdin=stdin, seccomp_path=self._seccomp, started=self._procs.add,
                pass_fds=plan.pass_fds,
            )
        finally:
            plan.close()

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
        job = self._launch(check_argv(argv), stdin=stdin is not None, die_with_us=True)
        try:
            return run_job(
                job.proc, stdin_data=stdin, timeout_s=default_timeout(self.limits, timeout_s),
                output_cap=default_cap(self.limits, output_cap), started=started, exit_code_of=exit_status,
                kill=job.reap,
            )
        finally:
            job.reap()  # stragglers of the namespace teardown, if any
            job.release()
            self._procs.discard(job.proc)

    def _spawn_worker(self, argv: list[str]) -> Channel:
        # The shim is the sandbox's pid 1: bwrap's own init would otherwise hold the channel's fds where a
        # process of the same uid (env code) could open them through /proc/1/fd.
        job = self._launch(argv, stdin=True, as_pid_1=self.shimmed)

        def kill() -> None:
            job.kill()
            self._procs.discard(job.proc)

        return ProcessChannel(job.proc, kill=kill)


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
