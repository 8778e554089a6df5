"""What the host's ``/proc`` says about a process: the one reader the backends and the reaper share. Host side.

The backends kill by host pid without asking the job (bwrap: whatever is left in a job's pid namespace;
Docker: the container's processes, seen from the host; both: a sandbox uid's stragglers), and the reaper
decides from a process's start time whether a lease's owner is still the process that wrote it.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable, Collection

_GONE = (b"Z", b"X")  # zombie or dead: exited, waiting for its parent; harmless


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name (``[state, ppid, pgrp, ...]``), or None.

    The name is in parentheses and may itself hold spaces and parentheses, so the split is after the last ``)``.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2:].split()
    except (OSError, ValueError):
        return None


def alive(pid: int) -> bool:
    """True unless the process is gone or a zombie."""
    fields = stat_fields(pid)
    return bool(fields) and fields[0] not in _GONE  # type: ignore[index]


def start_time(pid: int) -> str | None:
    """When the process started (clock ticks since boot, as text): with the pid, it names one process for good."""
    fields = stat_fields(pid)
    try:
        return fields[19].decode() if fields else None
    except IndexError:
        return None


def pid_namespace(pid: int) -> str | None:
    """The process's pid namespace as ``/proc/PID/ns/pid`` names it (``pid:[4026532...]``), or None."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def in_namespace(ns: str, zombies: bool = True) -> dict[int, int]:
    """host pid -> host ppid of every process in the pid namespace ``ns`` (zombies left out if ``zombies`` is False)."""
    procs: dict[int, int] = {}
    for pid in _pids():
        if pid_namespace(pid) != ns:
            continue
        fields = stat_fields(pid)
        if not fields or len(fields) < 2 or (not zombies and fields[0] in _GONE):
            continue
        try:
            procs[pid] = int(fields[1])
        except ValueError:
            continue
    return procs


def of_uid(uid: int) -> list[int]:
    """Pids of every process whose real uid is ``uid``."""
    pids = []
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(pid)
                        break
        except (OSError, ValueError, IndexError):
            continue
    return pids


def descendants(procs: dict[int, int], roots: set[int]) -> set[int]:
    """``roots`` and every process below them, from a pid -> ppid map."""
    found, frontier = set(roots), list(roots)
    while frontier:
        parent = frontier.pop()
        for pid, ppid in procs.items():
            if ppid == parent and pid not in found:
                found.add(pid)
                frontier.append(pid)
    return found


def kill_until_gone(
    find: Callable[[], Collection[int]], deadline_s: float = 5.0, pause_s: float = 0.002, stop_first: bool = False,
) -> None:
    """SIGKILL whatever ``find()`` returns until it returns nothing or ``deadline_s`` has passed.

    Killed processes can have forked in the meantime, hence the loop. ``stop_first`` SIGSTOPs the whole set
    before killing it, so that nothing in it forks while we kill.
    """
    signals = (signal.SIGSTOP, signal.SIGKILL) if stop_first else (signal.SIGKILL,)
    end = time.monotonic() + deadline_s
    while True:
        pids = find()
        if not pids or time.monotonic() > end:
            return
        for sig in signals:
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        time.sleep(pause_s)
