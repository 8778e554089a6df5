"""A sandbox's reaper never touches another live sandbox (issue 20's "Broken pipe" under load).

Two ways one sandbox's clean-up could SIGKILL another's processes, each made to happen here on purpose:

- **pid-namespace inode reuse.** The bwrap reaper finds a job's processes by their pid namespace, named by
  its inode number, and the kernel hands a freed namespace inode to the next namespace made anywhere on the
  host. A reap still sweeping after its namespace died (its sweep polls until nothing is left) then matched
  a newer sandbox's processes. The test builds that interleaving deterministically: job A's namespace is
  killed from outside, sandboxes B are opened until one would take A's inode, then A's sweep runs as it
  would had it begun just before A died (``procfs.alive`` answers for A's pid 1 as it did at the check).
  B must answer afterwards; and while A's job lives, no B may get A's inode (the job pins its namespace).
- **kill-uid collisions.** Each bwrap sandbox runs as a private host uid and ``close()`` kills every process
  of that uid. Two live sandboxes on one uid would kill each other; allocation must never hand out a uid
  that another live sandbox (of any process on this host) holds, or that a process still runs as.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox import procfs, uids
from sandbox.base import SandboxLimits

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="private uids and the namespace reaper need root")

LIMITS = SandboxLimits(wall_timeout_s=30, memory_mb=512)
REPO = str(Path(__file__).resolve().parents[2])


def _bwrap():
    from sandbox.bwrap import BwrapSandbox, probe

    if probe() is not None:
        pytest.skip(f"bwrap unavailable: {probe()}")
    return BwrapSandbox


def _child_namespace(launcher: int, wait_s: float = 5.0) -> tuple[int, str] | None:
    """(pid, pid namespace) of the one child of ``launcher`` (bwrap's pid 1, or unshare's forked command)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        with open(f"/proc/{launcher}/task/{launcher}/children") as f:
            children = f.read().split()
        ns = procfs.pid_namespace(int(children[0])) if children else None
        if ns is not None and ns != procfs.pid_namespace(os.getpid()):
            return int(children[0]), ns
        time.sleep(0.005)
    return None


def test_a_stale_reap_spares_processes_in_a_namespace_that_would_reuse_its_number(monkeypatch: pytest.MonkeyPatch) -> None:
    BwrapSandbox = _bwrap()
    with BwrapSandbox(LIMITS) as a:
        job = a._launch(["sleep", "60"], stdin=False)  # noqa: SLF001 - the job whose reap goes stale
        stale_ns, pid1 = job.pidns, job.pid1
        assert stale_ns is not None and pid1 is not None
        os.kill(pid1, signal.SIGKILL)  # A's namespace dies under the reaper's feet
        job.proc.wait(timeout=10)
        others: list[subprocess.Popen] = []
        b = BwrapSandbox(LIMITS)
        try:
            # New pid namespaces, each kept alive, until one takes A's number: the kernel gives the lowest free
            # number, so without a pin one of the first few does. Then a live sandbox B beside them.
            others, namespaces = _reusers(24, stale_ns)
            b.open()
            worker = b.start_worker("sandbox.handlers.echo")
            # The reap began while A's pid 1 was alive and sweeps on after it died: the interleaving, made exact.
            real_alive = procfs.alive
            monkeypatch.setattr(procfs, "alive", lambda pid: True if pid == pid1 else real_alive(pid))
            job.reap(deadline_s=1.0)
            monkeypatch.undo()
            killed = [pid for pid in namespaces if not procfs.alive(pid)]
            assert not killed, f"a stale reap of {stale_ns} killed processes of another namespace: {killed}"
            assert worker.call("echo", {"x": 1}, timeout_s=20) == {"x": 1}, "a stale reap killed sandbox B"
            assert stale_ns not in namespaces.values(), "a new namespace got the number of a job not yet released"
        finally:
            job.release()
            b.close()
            for other in others:
                other.kill()
                other.wait()


def test_a_released_job_never_sweeps_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a job is done (killed, waited, its namespace unpinned), its number is free for others, and reaping
    the job again (a second close of a crashed worker) touches nothing, whoever has that number now."""
    BwrapSandbox = _bwrap()
    with BwrapSandbox(LIMITS) as a:
        job = a._launch(["sleep", "60"], stdin=False)  # noqa: SLF001
        old_ns, pid1 = job.pidns, job.pid1
        job.kill()
        assert job.released and job.ns_fd is None
        others: list[subprocess.Popen] = []
        try:
            others, namespaces = _reusers(24, old_ns)
            real_alive = procfs.alive
            monkeypatch.setattr(procfs, "alive", lambda pid: True if pid == pid1 else real_alive(pid))
            job.reap(deadline_s=1.0)
            job.kill()
            monkeypatch.undo()
            killed = [pid for pid in namespaces if not procfs.alive(pid)]
            assert not killed, f"a released job's reap killed processes of another namespace: {killed}"
        finally:
            for other in others:
                other.kill()
                other.wait()


def test_uids_of_live_sandboxes_never_collide(monkeypatch: pytest.MonkeyPatch) -> None:
    """The allocator draws from a span squeezed to 3 uids: 3 sandboxes get 3 different ones, a 4th is refused
    with one clear line, and a uid another process holds (here a child process) is never handed out."""
    BwrapSandbox = _bwrap()
    base = 1_500_000 + random.randrange(900_000)
    monkeypatch.setattr(uids, "UID_BASE", base)
    monkeypatch.setattr(uids, "UID_SPAN", 3)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys,time; sys.path.insert(0, %r); from sandbox import uids; h = uids.hold(%d); "
        "print(h is not None, flush=True); time.sleep(60)") % (REPO, base + 1)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "True"
        opened = [BwrapSandbox(LIMITS), BwrapSandbox(LIMITS)]
        for sb in opened:
            sb.open()
        got = sorted(sb.uid for sb in opened)
        assert got == [base, base + 2], f"another process's uid or a duplicate was handed out: {got}"
        with pytest.raises(Exception, match="no free sandbox uid"):
            BwrapSandbox(LIMITS).open()
        opened[0].close()
        again = BwrapSandbox(LIMITS)
        again.open()
        assert again.uid == opened[0].uid  # a closed sandbox's uid is free again
        again.close()
        opened[1].close()
    finally:
        holder.kill()
        holder.wait()


def test_a_uid_a_process_still_runs_as_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dead owner's straggler (its hold is gone with it, its process is not) keeps its uid out of use."""
    base = 1_500_000 + random.randrange(900_000)
    monkeypatch.setattr(uids, "UID_BASE", base)
    monkeypatch.setattr(uids, "UID_SPAN", 2)
    straggler = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: os.setresuid(base, base, base))
    try:
        deadline = time.monotonic() + 5
        while not procfs.of_uid(base) and time.monotonic() < deadline:
            time.sleep(0.01)
        for _ in range(10):
            held = uids.allocate()
            assert held.uid == base + 1
            held.release()
    finally:
        straggler.kill()
        straggler.wait()


def _reusers(count: int, wanted: str) -> tuple[list[subprocess.Popen], dict[int, str]]:
    """New pid namespaces, each kept alive, until one is named ``wanted`` (or ``count`` were made)."""
    others: list[subprocess.Popen] = []
    namespaces: dict[int, str] = {}
    for _ in range(count):
        other = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "sleep", "60"])
        others.append(other)
        found = _child_namespace(other.pid)
        assert found is not None
        namespaces[found[0]] = found[1]
        if found[1] == wanted:
            break
    return others, namespaces


def test_docker_kills_stay_in_their_container_after_it_died_and_after_close() -> None:
    """A container killed behind the sandbox's back keeps its namespace number pinned while the sandbox is open;
    once closed, the sandbox's host-side killer does nothing at all."""
    from sandbox.docker_backend import DockerSandbox, probe

    if probe() is not None:
        pytest.skip(f"docker unavailable: {probe()}")
    sb = DockerSandbox(LIMITS)
    sb.open()
    others: list[subprocess.Popen] = []
    try:
        inside = sb._inside  # noqa: SLF001 - the host's killer of this sandbox's processes
        assert inside is not None and inside.local and inside.pidns is not None
        stale_ns = inside.pidns
        sb.client.api.kill(sb.container.id)  # its namespace dies while the sandbox is still open
        deadline = time.monotonic() + 20
        while procfs.alive(inside.init_pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        others, namespaces = _reusers(24, stale_ns)
        inside.reap()
        inside.kill_tree(inside.init_pid)
        assert stale_ns not in namespaces.values(), "a new namespace got the number of an open sandbox's container"
        sb.close()
        more, namespaces_after = _reusers(24, stale_ns)
        others += more
        namespaces.update(namespaces_after)
        inside.reap()
        killed = [pid for pid in namespaces if not procfs.alive(pid)]
        assert not killed, f"a dead container's killer reached processes of another namespace: {killed}"
    finally:
        sb.close()
        for other in others:
            other.kill()
            other.wait()
