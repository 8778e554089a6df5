"""Killing a Docker sandbox's processes without asking the container or its output reader. Host side.

Killing never goes through the thread that reads a flooding exec stream (the known hang where that thread is
also the one asked to kill it), nor through the daemon when it is local: the container's processes are found
in the host's ``/proc`` (same pid namespace as its PID 1) and SIGKILLed. When the daemon is on another host,
a small killer runs inside the container as the sandbox user instead.

The container's pid namespace is pinned (an open ``/proc/<PID 1>/ns/pid``) from the first look until
:meth:`ContainerProcesses.close`: ``/proc`` names a namespace by an inode number the kernel gives to the next
namespace made once the old one is gone, so an unpinned name could match another sandbox's processes.
"""

from __future__ import annotations

import os
from typing import Any

from sandbox import procfs
from sandbox.docker_container import USER

#: How long a kill keeps at processes that fork or have not died yet (a stuck one must not hang an exec).
_KILL_DEADLINE_S = 1.0

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


class ContainerProcesses:
    """The processes of one running container, as host pids: PID 1 (the reaper) and the live workers' trees."""

    def __init__(self, client: Any, container: Any, user: str = USER) -> None:
        self.client = client
        self.user = user
        self.container = container
        self.init_pid: int = int(container.attrs["State"]["Pid"])
        self.pidns: str | None = None
        self._ns_fd: int | None = None
        self.closed = False
        #: Host pids of the live workers (each is the subreaper of what it starts).
        self.worker_pids: set[int] = set()
        self.local = self._check_local()

    def _check_local(self) -> bool:
        """Is the container's PID 1 visible (and ours to signal) in this host's /proc?"""
        pid = self.init_pid
        if not pid or os.geteuid() != 0:
            return False
        try:  # the namespace is held first, the process checked after: what is held is the container's
            fd = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                cg = f.read()
            inode, mine = os.fstat(fd).st_ino, os.stat("/proc/self/ns/pid").st_ino
        except OSError:
            cg, inode, mine = "", 0, 0
        if self.container.id not in cg or inode == mine:
            os.close(fd)
            return False
        self._ns_fd, self.pidns = fd, f"pid:[{inode}]"
        return True

    def close(self) -> None:
        """Unpin the namespace once the container is gone: from here on nothing is killed from the host."""
        self.closed, self.pidns = True, None
        fd, self._ns_fd = self._ns_fd, None
        if fd is not None:
            os.close(fd)

    def _procs(self) -> dict[int, int]:
        """host pid -> host ppid for every process in the container's pid namespace."""
        ns = self.pidns
        return procfs.in_namespace(ns) if ns is not None else {}  # closed meanwhile: nothing is ours

    def reap(self) -> None:
        """SIGKILL every container process except PID 1 and the live workers' trees."""
        if self.closed:
            return
        if not self.local:
            self.kill_inside()
            return

        def victims() -> list[int]:
            procs = self._procs()
            keep = {self.init_pid} | procfs.descendants(procs, {p for p in self.worker_pids if p in procs})
            return [p for p in procs if p not in keep]

        procfs.kill_until_gone(victims, _KILL_DEADLINE_S)

    def kill_tree(self, root: int) -> None:
        """Kill one worker's process tree (host pids). The worker is its descendants' subreaper, so
        double-forked daemons are in the tree; the tree is stopped first (no forking while we kill),
        then killed, until nothing of it is left."""
        if self.closed:
            return
        if not self.local:
            self.kill_inside()
            return

        def tree() -> set[int]:
            procs = self._procs()
            return procfs.descendants(procs, {root} & set(procs))

        procfs.kill_until_gone(tree, _KILL_DEADLINE_S, stop_first=True)

    def kill_inside(self) -> None:
        """Remote daemon: kill from inside (everything but PID 1, workers included)."""
        try:
            self.client.api.exec_start(self.client.api.exec_create(
                self.container.id, ["python", "-S", "-c", _KILL_INSIDE_SRC], user=self.user)["Id"])
        except Exception:  # noqa: BLE001
            pass
