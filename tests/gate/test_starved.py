"""A busy machine is not a slow env: a worker that gets no CPU is waited for, then reported as starved; a worker that
spins or sleeps past its time is a hang. Driven deterministically by stopping the worker's processes (SIGSTOP: a
stopped process uses no CPU, like one a loaded machine never runs) instead of loading the machine."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from env_registry.hosted import SandboxedEnv
from factory.validation.envclock import EnvClock, _tree, timed_call
from sandbox import available_backends

BACKENDS = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not BACKENDS, reason=f"no sandbox backend available: {available_backends()}")
TINY = (Path(__file__).resolve().parent / "envs" / "tiny_checked.py").read_text()
SPIN = "sum(i * i for i in range(1000000))"
# generate() does about 0.2-0.5 s of CPU work per call when seed is 7, and never returns when seed is 13
SLOW = TINY.replace("        rng = self.rng(seed)\n",
                    f"        if seed == 7:\n            for _ in range(5):\n                {SPIN}\n"
                    "        while seed == 13:\n            pass\n        rng = self.rng(seed)\n", 1)


def _signal_tree(env: SandboxedEnv, sig: int) -> list[int]:
    clock = EnvClock.of(env.worker)
    assert clock is not None, "the host must see the worker's processes"
    clock.sample()
    pids = _tree(clock.root or 0)
    assert pids
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return pids


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stopped_worker_is_waited_for_not_judged_a_hang(backend: str) -> None:
    with SandboxedEnv(SLOW, backend=backend) as env:
        assert env.call("generate", {"seed": 1})  # warm
        pids: list[int] = []
        stopper = threading.Timer(0.05, lambda: pids.extend(_signal_tree(env, signal.SIGSTOP)))
        resume = threading.Timer(3.5, lambda: _signal_tree(env, signal.SIGCONT))
        started = time.monotonic()
        stopper.start()
        resume.start()
        try:  # 2 s of the env's own time; stopped for 3.5 s of wall time: a wall clock would call it a hang
            answer, why = timed_call(env.worker, lambda limit: env.worker.call("generate", {"seed": 7}, timeout_s=limit), 2.0, 30.0)
        finally:
            resume.join()
        assert pids and why is None and answer and time.monotonic() - started >= 3.4


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_worker_stopped_for_good_is_starved_and_a_spinning_one_hangs(backend: str) -> None:
    with SandboxedEnv(SLOW, backend=backend) as env:
        assert env.call("generate", {"seed": 1})
        stopper = threading.Timer(0.05, lambda: _signal_tree(env, signal.SIGSTOP))
        stopper.start()
        started = time.monotonic()
        answer, why = timed_call(env.worker, lambda limit: env.worker.call("generate", {"seed": 7}, timeout_s=limit), 1.0, 1.5)
        assert (answer, why) == (None, "starved") and time.monotonic() - started >= 2.4
        assert not env.worker.alive  # killed, stopped or not
    with SandboxedEnv(SLOW, backend=backend) as env:
        started = time.monotonic()
        answer, why = timed_call(env.worker, lambda limit: env.worker.call("generate", {"seed": 13}, timeout_s=limit), 1.0, 30.0)
        assert (answer, why) == (None, "hang") and time.monotonic() - started < 10  # its own time, not the 30 s starved wait
