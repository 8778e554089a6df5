"""One bwrap job as the host controls it: start it, learn its pid namespace, and end everything in it. Host side.

bwrap reports the host pid of the sandbox's pid 1 on ``--info-fd``. When that process ends, the kernel kills
every process left in the job's pid namespace, so double-forked daemons do not outlive an exec; but bwrap's
outer process reports the exit as soon as the main command ends, while the kernel may still be tearing the
namespace down. :meth:`Job.reap` kills what is left and waits until none is, so "nothing outlives exec" holds
the moment exec returns, not a moment later.

The reaper finds a job's processes by their pid namespace, which ``/proc`` names by an inode number, and the
kernel gives a freed namespace's number to the next namespace made anywhere on the host at once. So a job
*pins* its namespace: it holds ``/proc/<pid 1>/ns/pid`` open from launch until :meth:`Job.release`, which
keeps the namespace (not its processes) in existence and its number out of reuse. A sweep that outlives the
job's processes then finds nothing; after release the job never sweeps again.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from dataclasses import dataclass
from typing import Callable

from sandbox import procfs
from sandbox._proc import _killpg, spawn


@dataclass
class Job:
    """A launched bwrap process and, once bwrap has said so, its sandbox's pid 1 and pinned pid namespace."""

    proc: subprocess.Popen
    pid1: int | None = None
    pidns: str | None = None
    #: An open ``/proc/<pid 1>/ns/pid``: while it is open, no other namespace can be named ``pidns``.
    ns_fd: int | None = None
    released: bool = False

    def reap(self, deadline_s: float = 5.0) -> None:
        """SIGKILL every process in the job's pid namespace and wait until none is left (nothing once released)."""
        if self.released:
            return  # its namespace number may belong to another sandbox now, and bwrap's pid to anyone
        if self.pidns is None:  # bwrap never said, or pid 1 was gone before we looked: the group is all we know
            _killpg(self.proc.pid)
            return
        if self.pid1 is not None and not procfs.alive(self.pid1):
            return  # pid 1 only finishes exiting after the kernel killed the whole namespace
        ns = self.pidns
        procfs.kill_until_gone(lambda: procfs.in_namespace(ns, zombies=False), deadline_s)

    def release(self) -> None:
        """Unpin the namespace once the job is reaped: from here on :meth:`reap` does nothing."""
        self.released = True
        fd, self.ns_fd = self.ns_fd, None
        if fd is not None:
            os.close(fd)

    def kill(self) -> None:
        """End a worker's job: its namespace, then bwrap itself (its group, if it does not exit); then release it."""
        if self.released:
            return
        self.reap()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _killpg(self.proc.pid)
        self.release()

    def __del__(self) -> None:
        if self.ns_fd is not None:
            os.close(self.ns_fd)


def launch(
    command: Callable[[int, int | None], list[str]],
    *,
    cwd: str,
    preexec_fn: Callable[[], None],
    stdin: bool,
    seccomp_path: str | None,
    started: Callable[[subprocess.Popen], None],
    pass_fds: tuple[int, ...] = (),
) -> Job:
    """Start ``command(info_fd, seccomp_fd)`` and wait for bwrap's report of the sandbox's pid 1.

    ``started`` gets the process as soon as it exists (so a concurrent ``close()`` can kill it while we wait).
    """
    info_r, info_w = os.pipe()
    seccomp_fd = os.open(seccomp_path, os.O_RDONLY) if seccomp_path else None
    try:
        proc = spawn(
            command(info_w, seccomp_fd), cwd=cwd, env={"PATH": "/usr/bin:/bin"}, preexec_fn=preexec_fn, stdin=stdin,
            pass_fds=(info_w, *pass_fds) if seccomp_fd is None else (info_w, seccomp_fd, *pass_fds),
        )
    except BaseException:
        os.close(info_r)
        raise
    finally:
        os.close(info_w)
        if seccomp_fd is not None:
            os.close(seccomp_fd)
    started(proc)
    try:
        info = read_info(info_r)
    finally:
        os.close(info_r)
    job = Job(proc)
    pid1 = info.get("child-pid")
    if isinstance(pid1, int):
        job.pid1 = pid1
        job.ns_fd, job.pidns = pin_namespace(pid1, proc.pid)  # None: already gone (e.g. `true`), nothing to reap
    return job


def pin_namespace(pid1: int, launcher: int) -> tuple[int | None, str | None]:
    """(an open fd on the pid namespace of ``pid1``, its name) if ``pid1`` is still the launcher's child in a
    namespace other than ours; else (None, None). The fd is opened first and the parent checked after, so the
    namespace held is the one of the launcher's child, never of a process that took a recycled pid."""
    try:
        fd = os.open(f"/proc/{pid1}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None, None
    fields = procfs.stat_fields(pid1)
    try:
        mine = os.stat("/proc/self/ns/pid").st_ino
        ours = fields is not None and len(fields) > 1 and int(fields[1]) == launcher
        inode = os.fstat(fd).st_ino
    except (OSError, ValueError):
        ours, inode, mine = False, 0, 0
    if not ours or inode == mine:
        os.close(fd)
        return None, None
    return fd, f"pid:[{inode}]"


def read_info(fd: int, timeout_s: float = 30.0) -> dict:
    """Read bwrap's --info-fd JSON (it holds the host pid of the sandbox's pid 1)."""
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
