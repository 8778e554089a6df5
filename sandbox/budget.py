"""What all sandboxes on this host may hold together, enforced by the cgroup they all live under. Host side.

One sandbox is held by its own limits (:class:`sandbox.base.SandboxLimits`); many at once could still fill the
host's tables. So every bwrap sandbox's cgroup and (with Docker's cgroupfs driver) every sandbox container is
made under one parent group, ``trace-factory`` (``$TRACE_SANDBOX_CGROUP_PARENT``), which carries:

- ``pids.max`` = :attr:`Budget.tasks` (processes and threads of every sandbox together). Open files follow:
  each task holds at most ``open_files`` (RLIMIT_NOFILE), and a sandbox's ``open_files`` is lowered to
  :attr:`Budget.files_per_task` if it asks for more, so all sandboxes together hold at most ``tasks *
  files_per_task`` files;
- a memory limit = :attr:`Budget.memory_mb`, which also bounds their inodes (tmpfs files, pipes, sockets: the
  kernel charges each to the sandbox that made it).

Defaults come from the host: tasks a quarter of ``kernel.pid_max`` and ``threads-max`` (at most 2048), open
files a quarter of ``fs.file-max``, memory three quarters of RAM. ``$TRACE_SANDBOX_TOTAL_TASKS``,
``$TRACE_SANDBOX_TOTAL_FILES`` and ``$TRACE_SANDBOX_TOTAL_MEMORY_MB`` override them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_PARENT = "trace-factory"
_MAX_TASKS = 2048


def parent_name() -> str:
    """The parent group's name (one path component; tests use a private one)."""
    name = os.environ.get("TRACE_SANDBOX_CGROUP_PARENT") or DEFAULT_PARENT
    return name if name.replace("-", "").replace("_", "").isalnum() else DEFAULT_PARENT


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


@dataclass(frozen=True)
class Budget:
    tasks: int
    files: int
    memory_mb: int

    @property
    def files_per_task(self) -> int:
        return max(16, self.files // self.tasks)


def host_budget() -> Budget:
    """The budget for all sandboxes of this host (see the module docstring)."""
    pid_max = _read_int("/proc/sys/kernel/pid_max") or 32768
    threads_max = _read_int("/proc/sys/kernel/threads-max") or 32768
    file_max = _read_int("/proc/sys/fs/file-max") or 1 << 20
    mem_kb = 0
    try:
        with open("/proc/meminfo") as f:
            mem_kb = next((int(line.split()[1]) for line in f if line.startswith("MemTotal:")), 0)
    except (OSError, ValueError):
        pass
    tasks = _env_int("TRACE_SANDBOX_TOTAL_TASKS") or min(_MAX_TASKS, pid_max // 4, threads_max // 4)
    files = _env_int("TRACE_SANDBOX_TOTAL_FILES") or file_max // 4
    memory = _env_int("TRACE_SANDBOX_TOTAL_MEMORY_MB") or max(256, mem_kb * 3 // 4 // 1024)
    return Budget(tasks=tasks, files=files, memory_mb=memory)


def apply(parents: dict[str, str], version: int) -> str | None:
    """Write the budget to the parent group's dirs (controller -> dir; v2: one dir under "" for all).
    None, or one line naming what could not be written."""
    budget = host_budget()
    failed = []
    memory = str(budget.memory_mb << 20)
    if version == 2:
        plan = {parents[""]: {"pids.max": str(budget.tasks), "memory.max": memory}}
    else:
        plan = {parents["pids"]: {"pids.max": str(budget.tasks)}, parents["memory"]: {"memory.limit_in_bytes": memory}}
    for directory, settings in plan.items():
        for key, value in settings.items():
            try:
                with open(os.path.join(directory, key), "w") as f:
                    f.write(value)
            except OSError as exc:
                failed.append(f"{key} ({exc.strerror})")
    return f"no limit across sandboxes: {', '.join(failed)}" if failed else None
