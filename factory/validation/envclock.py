"""How much time an env worker's processes had, read from the host: hang detection that a busy machine cannot fool.

A call to a worker is given ``timeout_s`` of the env's own time: wall time less what its processes spent
waiting for a CPU (``/proc/PID/schedstat``, the run-queue delay) or stopped (state ``T``: SIGSTOP, a debugger,
a frozen cgroup). A CPU-bound loop and a ``sleep`` both use their own time and are hangs; a worker that a loaded
machine never runs, or that was stopped, does not, so the gate waits for it, up to ``starved_wait_s`` of wall
time more, then stops with "the machine is starved" instead of judging the env (:class:`MachineStarved`); a
worker that still gets a little CPU (at least :data:`MIN_SHARE` of the wall time) is waited for until its own
time runs out.

The worker's processes are the host process of its channel and its descendants (bwrap, the shim, the handler:
a pid namespace's processes are visible from the host's ``/proc``). A backend whose processes the host cannot
see (docker, e2b) has no clock: its calls keep the plain wall-clock timeout. Host side.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

POLL_S = 0.25
"""How often a long call's processes are sampled (calls shorter than this cost nothing)."""
MIN_SHARE = 0.05
"""A worker that had less than this share of its wall time as its own over the last ``starved_wait_s`` (past its
limit) is starved; one that progresses faster, however slowly, is waited for until its own time runs out."""


class MachineStarved(Exception):
    """The env's processes got no CPU (waiting, or stopped) for longer than the gate waits: not the env's fault."""


@dataclass
class Sample:
    at: float
    waits: dict[int, int]  # pid -> run-queue delay so far, ns
    stopped: bool


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
            ppid = int(data[data.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        out.setdefault(ppid, []).append(int(name))
    return out


def _tree(root: int) -> list[int]:
    children, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _state_and_wait(pid: int) -> tuple[bytes, int] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            wait = int(f.read().split()[1])
        return data[data.rindex(b")") + 2:].split()[0], wait
    except (OSError, ValueError, IndexError):
        return None


class EnvClock:
    """The env's own time during one call, from samples of its processes every :data:`POLL_S`."""

    def __init__(self, root: Callable[[], int]) -> None:
        self._find_root = root
        self.root: int | None = None

    @classmethod
    def of(cls, worker: Any) -> "EnvClock | None":
        """The clock of a worker whose processes this host can see (a local child process, or a docker exec whose
        host pid the daemon names), else None."""
        channel = getattr(worker, "_channel", None)
        pid = getattr(getattr(channel, "proc", None), "pid", None)
        if isinstance(pid, int):
            return cls(lambda: pid) if os.path.exists(f"/proc/{pid}/schedstat") else None
        client, exec_id = getattr(channel, "client", None), getattr(channel, "exec_id", None)
        if client is not None and isinstance(exec_id, str) and os.path.exists("/proc/self/schedstat"):
            return cls(lambda: int(client.api.exec_inspect(exec_id).get("Pid") or 0))  # asked once, on a long call
        return None

    def sample(self) -> Sample:
        waits, stopped = {}, False
        if self.root is None:
            try:
                self.root = self._find_root()
            except Exception:  # noqa: BLE001 - a daemon that does not answer: no process to read, all time is the env's
                self.root = 0
        for pid in _tree(self.root) if self.root else []:
            found = _state_and_wait(pid)
            if found is None:
                continue
            state, wait = found
            waits[pid] = wait
            stopped = stopped or state in (b"T", b"t")
        return Sample(time.monotonic(), waits, stopped)

    @staticmethod
    def own(before: Sample, after: Sample) -> float:
        """Seconds between two samples that were the env's own: none if a process was stopped at either end,
        else the wall time less the longest run-queue delay any of its processes had in between."""
        span = after.at - before.at
        if before.stopped or after.stopped:
            return 0.0
        waited = max((after.waits[p] - before.waits.get(p, 0) for p in after.waits), default=0) / 1e9
        return max(0.0, span - max(0.0, waited))


def wall_limit(timeout_s: float, starved_wait_s: float) -> float:
    """The longest wall time a call with ``timeout_s`` of its own time can take before the watchdog ends it."""
    return timeout_s / MIN_SHARE + starved_wait_s + 5 * POLL_S


def timed_call(worker: Any, call: Callable[[float], Any], timeout_s: float, starved_wait_s: float) -> tuple[Any, str | None]:
    """``call(wall_timeout)`` with ``timeout_s`` of the env's own time: returns (result, None), or (None, why)
    where why is ``"hang"`` (the env used its time: the worker was killed) or ``"starved"`` (it got no CPU for
    ``starved_wait_s`` past its time: the worker was killed). Exceptions of ``call`` propagate unless the
    watchdog killed the worker for one of those reasons. Without a clock, ``call(timeout_s)``."""
    clock = EnvClock.of(worker)
    if clock is None:
        return call(timeout_s), None
    done, verdict, decided = threading.Event(), {"why": None}, threading.Lock()
    started = time.monotonic()
    in_call = (lambda: bool(getattr(worker, "in_call", True)))

    def watch() -> None:
        if done.wait(POLL_S):
            return
        own, last = POLL_S, clock.sample()  # the first poll's span counts as the env's (at most POLL_S of slack)
        history = [(last.at, own)]  # (when, own time so far), to tell a slow env from one that gets no CPU
        while not done.wait(POLL_S):
            now = clock.sample()
            # ``call`` may make several requests: the caller's time between them (a busy host preparing the
            # next step) is not the env's, so a span counts only when a request is out at its end
            own += EnvClock.own(last, now) if in_call() else 0.0
            last = now
            history.append((now.at, own))
            window = [o for at, o in history if at <= now.at - starved_wait_s]
            why = None
            if own >= timeout_s:
                why = "hang"
            elif now.at - started >= timeout_s + starved_wait_s and window and own - window[-1] < MIN_SHARE * starved_wait_s:
                why = "starved"
            if why:
                with decided:  # never after the call has returned: its worker stays usable
                    if done.is_set():
                        return
                    verdict["why"] = why
                    worker.close()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        answer = call(wall_limit(timeout_s, starved_wait_s))
    except Exception:
        with decided:
            done.set()
        if verdict["why"]:
            return None, verdict["why"]
        raise
    with decided:
        done.set()
    if verdict["why"]:  # the watchdog ended the worker as the answer came: the verdict stands, not the answer
        return None, verdict["why"]
    return answer, None
