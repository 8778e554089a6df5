"""One cgroup per bwrap sandbox: memory (tmpfs pages included), processes and CPU held in aggregate. Host side.

rlimits are per process: ten children each under RLIMIT_AS together use ten times it. A cgroup holds the
whole sandbox - every exec, every worker and everything they start - to one budget.

cgroup v2 (a unified hierarchy with the memory, pids and cpu controllers) is used where the host has it: a
``trace-factory`` group at the root of the hierarchy delegates the controllers to one child per sandbox.
Otherwise cgroup v1: one directory per controller, created under this process's own group for that
controller (so the sandbox stays inside whatever accounting the caller is under). Either needs root; where
a controller is missing or not writable, :func:`create` says which, once, as a warning. The parent group
holds the budget of all sandboxes together (:mod:`sandbox.budget`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sandbox import budget, procfs
from sandbox.base import SandboxLimits

CGROUP_ROOT = "/sys/fs/cgroup"
_V1_CONTROLLERS = ("memory", "pids", "cpu")
_PERIOD_US = 100_000


@dataclass
class Cgroup:
    """The directories of one sandbox's cgroup (one for v2, one per controller for v1)."""

    version: int
    dirs: list[str] = field(default_factory=list)
    #: What of the budget across sandboxes could not be written (None: all of it holds).
    note: str | None = None

    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.procs_files():
            try:
                with open(path) as f:
                    found.update(int(x) for x in f.read().split())
            except (OSError, ValueError):
                continue
        return found

    def kill_all(self, deadline_s: float = 5.0) -> None:
        """SIGKILL every process in the group until none is left (v2: cgroup.kill does it in one write)."""
        if self.version == 2 and self.dirs:
            _write(os.path.join(self.dirs[0], "cgroup.kill"), "1")
        procfs.kill_until_gone(self.pids, deadline_s, pause_s=0.005)

    def remove(self) -> None:
        self.kill_all()
        for d in self.dirs:
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # processes still exiting
                    time.sleep(0.01)

    def memory_peak(self) -> int | None:
        """Highest memory use of the group in bytes (for the abuse suite's figures)."""
        for d in self.dirs:
            for name in ("memory.max_usage_in_bytes", "memory.peak"):
                value = _read(os.path.join(d, name))
                if value is not None and value.isdigit():
                    return int(value)
        return None

    def cpu_usage_us(self) -> int | None:
        for d in self.dirs:
            value = _read(os.path.join(d, "cpuacct.usage")) if self.version == 1 else None
            if value is not None and value.isdigit():
                return int(value) // 1000
            stat = _read(os.path.join(d, "cpu.stat"))
            if stat:
                for line in stat.splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1])
        return None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _write(path: str, value: str) -> bool:
    try:
        with open(path, "w") as f:
            f.write(value)
        return True
    except OSError:
        return False


def _own_path(controller: str) -> str | None:
    """This process's group for ``controller`` (v1) or in the unified hierarchy (controller '')."""
    text = _read("/proc/self/cgroup") or ""
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if (controller == "" and controllers == "" and line.startswith("0::")) or controller in controllers.split(","):
            return path
    return None


def _v2_mount() -> str | None:
    for candidate in (CGROUP_ROOT, os.path.join(CGROUP_ROOT, "unified")):
        controllers = _read(os.path.join(candidate, "cgroup.controllers"))
        if controllers is not None and {"memory", "pids", "cpu"} <= set(controllers.split()):
            return candidate
    return None


def version() -> int | None:
    """2 or 1 (what this host offers for memory+pids+cpu), or None (no usable cgroups)."""
    if _v2_mount():
        return 2
    if all(os.path.isdir(os.path.join(CGROUP_ROOT, c)) for c in _V1_CONTROLLERS):
        return 1
    return None


def create(name: str, limits: SandboxLimits, announce: Callable[[Cgroup], None] | None = None) -> tuple[Cgroup | None, str | None]:
    """A fresh cgroup for one sandbox with ``limits`` applied, or (None, why not).

    ``announce`` is called with every directory about to be made before the first is made, so the sandbox's
    lease names them even if this process is killed halfway (removing one that was never made is harmless).
    """
    if os.geteuid() != 0:
        return None, "no cgroup (not root): memory, process and CPU limits hold per process only"
    mount = _v2_mount()
    group = budget.parent_name()
    if mount:
        parent = os.path.join(mount, group)
        try:
            os.makedirs(parent, exist_ok=True)
            _write(os.path.join(mount, "cgroup.subtree_control"), "+memory +pids +cpu")
            if not _write(os.path.join(parent, "cgroup.subtree_control"), "+memory +pids +cpu"):
                raise OSError("cannot delegate memory, pids and cpu")
            cg = Cgroup(2, [os.path.join(parent, name)], note=budget.apply({"": parent}, 2))
            if announce is not None:
                announce(cg)
            os.mkdir(cg.dirs[0])
        except OSError as exc:
            return None, f"no cgroup (v2: {exc}): memory, process and CPU limits hold per process only"
        settings = {"memory.max": str(limits.memory_mb << 20), "memory.swap.max": "0", "pids.max": str(limits.max_processes),
                    "cpu.max": f"{int(limits.cpu_quota * _PERIOD_US)} {_PERIOD_US}"}
        return _apply(cg, {cg.dirs[0]: settings}, optional={"memory.swap.max"})
    if version() != 1:
        return None, "no cgroup (neither v2 with memory/pids/cpu nor v1 found): limits hold per process only"
    directories = {c: os.path.join(CGROUP_ROOT, c, (_own_path(c) or "/").lstrip("/"), group, name) for c in _V1_CONTROLLERS}
    if announce is not None:
        announce(Cgroup(1, list(directories.values())))
    cg = Cgroup(1)
    plan: dict[str, dict[str, str]] = {}
    for controller, directory in directories.items():
        try:
            os.makedirs(directory)
        except OSError as exc:
            cg.remove()
            return None, f"no cgroup (v1 {controller}: {exc.strerror}): memory, process and CPU limits hold per process only"
        cg.dirs.append(directory)
        plan[directory] = {
            "memory": {"memory.limit_in_bytes": str(limits.memory_mb << 20),
                       "memory.memsw.limit_in_bytes": str(limits.memory_mb << 20)},
            "pids": {"pids.max": str(limits.max_processes)},
            "cpu": {"cpu.cfs_period_us": str(_PERIOD_US), "cpu.cfs_quota_us": str(int(limits.cpu_quota * _PERIOD_US))},
        }[controller]
    cg.note = budget.apply({c: os.path.dirname(d) for c, d in directories.items()}, 1)
    return _apply(cg, plan, optional={"memory.memsw.limit_in_bytes"})


def _apply(cg: Cgroup, plan: dict[str, dict[str, str]], optional: set[str]) -> tuple[Cgroup | None, str | None]:
    for directory, settings in plan.items():
        for key, value in settings.items():
            path = os.path.join(directory, key)
            if not _write(path, value) and key not in optional:
                cg.remove()
                return None, f"no cgroup (cannot set {key}): memory, process and CPU limits hold per process only"
    return cg, None


def join(procs_files: list[str]) -> None:
    """Move the calling process into the group (runs in a forked child before exec: no allocation-heavy work)."""
    pid = str(os.getpid()).encode()
    for path in procs_files:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, pid)
        finally:
            os.close(fd)
