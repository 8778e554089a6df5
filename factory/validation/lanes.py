"""The gate's workers: one sandboxed env per lane, the work of a check spread over them in parallel.

Each lane is a :class:`~env_registry.hosted.SandboxedEnv`, the constructor training uses, in a sandbox of its
own (a sandbox's cgroup holds its workers to one CPU, so parallel work needs separate sandboxes). A batch of
calls is spread over the lanes by threads (the host only waits on pipes while the workers compute) and the
answers come back in the order they were asked, so a check reads the same results on one lane or on eight.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

from env_registry.hosted import SandboxedEnv
from sandbox import SandboxLimits, WorkerTimeout

Call = tuple[str, dict[str, Any], float]  # (method, params, timeout in seconds)


def default_lanes(requested: int) -> int:
    """``requested`` lanes, or for 0 one per CPU core this process may use (at least 2, at most 8)."""
    if requested:
        return requested
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 2
    return max(2, min(8, cores))


class Kept:
    """An env opened by a thread that then waits until the env is closed. Sandboxes tie their processes to
    the thread that started them (a parent-death signal), so the opening thread must outlive the env."""

    def __init__(self, open_env: Callable[[], SandboxedEnv]) -> None:
        self.env: SandboxedEnv | None = None
        self.error: BaseException | None = None
        self.opened = threading.Event()
        self.release = threading.Event()
        self.thread = threading.Thread(target=self._keep, args=(open_env,), daemon=True)
        self.thread.start()

    def _keep(self, open_env: Callable[[], SandboxedEnv]) -> None:
        try:
            self.env = open_env()
        except BaseException as exc:  # handed to whoever asks for the env
            self.error = exc
        self.opened.set()
        self.release.wait()
        if self.env is not None:
            self.env.close()

    def get(self) -> SandboxedEnv:
        self.opened.wait()
        if self.env is None:
            raise self.error or RuntimeError("the worker did not open")
        return self.env

    def close(self) -> None:
        self.release.set()
        self.thread.join(timeout=60)


class Lanes:
    """The main env (lane 0, opened first: its load is the interface verdict) and the others, opened in the
    background while lane 0 works; a lane that fails to open is left out (the others carry its share)."""

    def __init__(self, opener: Callable[[], SandboxedEnv], main: SandboxedEnv, count: int) -> None:
        self.opener = opener
        self.envs: list[SandboxedEnv] = [main]
        self.wanted = count
        self.lock = threading.Lock()
        self.kept = [Kept(opener) for _ in range(count - 1)]
        self.pending = bool(self.kept)

    @property
    def main(self) -> SandboxedEnv:
        return self.envs[0]

    @main.setter
    def main(self, env: SandboxedEnv) -> None:
        self.envs[0] = env

    def ready(self) -> list[SandboxedEnv]:
        """The lanes open now (waits for the background openers the first time more than one is wanted; a
        lane that failed to open is left out: lane 0's load is the verdict)."""
        if self.pending:
            for kept in self.kept:
                kept.opened.wait()
                if kept.env is not None:
                    self.envs.append(kept.env)
            self.pending = False
        with self.lock:
            return [env for env in self.envs if env.worker.alive]

    def map(self, calls: list[Call], invoke: Callable[[Any, str, dict[str, Any], float], Any]) -> list[Any]:
        """Every call on some lane, in parallel; results (or the exception of the first failing call, in the
        order asked) in the order of ``calls``."""
        lanes = self.ready() if len(calls) > 1 else [self.main]
        if len(lanes) <= 1 or len(calls) <= 1:
            return [invoke(self.main.worker, method, params, timeout) for method, params, timeout in calls]
        results: list[Any] = [None] * len(calls)
        errors: dict[int, BaseException] = {}
        cursor = iter(range(len(calls)))
        take = threading.Lock()

        def serve(env: SandboxedEnv) -> None:
            while True:
                with take:
                    index = next(cursor, None)
                    if index is None or errors:
                        return
                method, params, timeout = calls[index]
                try:
                    results[index] = invoke(env.worker, method, params, timeout)
                except BaseException as exc:  # re-raised below, the first in call order
                    errors[index] = exc
                    return

        threads = [threading.Thread(target=serve, args=(env,), daemon=True) for env in lanes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[min(errors)]
        return results

    def replace_dead(self) -> None:
        """Drop lanes whose worker died (lane 0 is replaced by the gate, which owns the verdict on it)."""
        with self.lock:
            self.envs = [self.envs[0]] + [env for env in self.envs[1:] if env.worker.alive]

    def close(self) -> None:
        """Close every lane but lane 0 (the gate closes that one)."""
        with self.lock:
            self.envs = self.envs[:1]
        for kept in self.kept:
            kept.close()


def busy_factor() -> float:
    """How many runnable processes there are per core this process may use (the 1-minute load average)."""
    try:
        return os.getloadavg()[0] / max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return 1.0


def opener(source: str, backend: str, limits: SandboxLimits | None, load_timeout_s: float, rpc_timeout_s: float) -> Callable[[], SandboxedEnv]:
    """How the gate opens a worker: exactly as training does (a random hash seed, the same module name). A load
    that times out on a busy machine (more runnable processes than cores) is tried once more with its time
    stretched by the load: a slow machine is not an env that hangs on import (that one times out again)."""

    def open_env() -> SandboxedEnv:
        def attempt(timeout_s: float) -> SandboxedEnv:
            return SandboxedEnv(source, backend=backend, limits=limits, load_timeout_s=timeout_s, rpc_timeout_s=rpc_timeout_s)

        try:
            return attempt(load_timeout_s)
        except WorkerTimeout:
            busy = busy_factor()
            if busy <= 1:
                raise
            return attempt(load_timeout_s * (1 + busy))

    return open_env
