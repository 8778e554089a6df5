"""A stall in the env's native code (a backtracking regex holds the interpreter in C: no signal, no Python-level
timer can end it) ends the step within the step deadline, is the env's fault, and costs the next episode
nothing: the host kills the worker, the runner's next reset gets a fresh one, and a replay of the stalled
actions fails at once instead of stalling again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from _sbx import TEST_LIMITS, backend_reason
from env_registry.hosted import EnvStalled, SandboxedEnv, SandboxedRunner
from trace_env.sdk import call

TINY = (Path(__file__).resolve().parents[1] / "envs" / "tiny_cancel.py").read_text()
CONTAINED = [b for b in ("bwrap", "docker") if backend_reason(b) is None]
pytestmark = pytest.mark.skipif(not CONTAINED, reason="needs bwrap or docker")

#: Looking up reservation "STALL" runs a regex that backtracks for far longer than any deadline, in C.
STALLING = TINY.replace(
    '    def get_reservation_details(self, state, reservation_id):\n',
    '    def get_reservation_details(self, state, reservation_id):\n'
    '        if reservation_id == "STALL":\n'
    '            import re\n'
    '            re.match(r"(a|aa)+$", "a" * 200 + "b")\n', 1)
DEADLINE_S = 3.0


@pytest.fixture(params=CONTAINED)
def backend(request) -> str:  # type: ignore[no-untyped-def]
    return request.param


def test_the_source_stalls_where_the_test_says() -> None:
    assert STALLING != TINY and 're.match(r"(a|aa)+$"' in STALLING


def test_a_native_stall_ends_the_step_in_time_as_the_envs_fault_and_the_next_episode_runs(backend: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from env_registry import hosted as hosted_module

    monkeypatch.setattr(hosted_module, "STALLS", hosted_module._StallMemo())  # what another backend's run stalled on
    hosted = SandboxedEnv(STALLING, backend=backend, limits=TEST_LIMITS, step_timeout_s=DEADLINE_S)
    runner = SandboxedRunner(hosted)
    try:
        first = hosted.worker
        runner.reset(7)
        started = time.monotonic()
        with pytest.raises(EnvStalled) as stalled:
            runner.step(call("get_reservation_details", reservation_id="STALL"))
        took = time.monotonic() - started
        assert took < DEADLINE_S + 2.0, f"the stalled step took {took:.1f} s"
        message = str(stalled.value)
        assert "the env stalled" in message and "seed 7" in message and "tiny_cancel" in message
        assert not first.alive  # the stalled worker was killed

        # the next episode runs normally, on a fresh worker
        result = runner.reset(8)
        assert "Please cancel" in result.observation
        step = runner.step(call("get_reservation_details", reservation_id="NOPE"))
        assert "not found" in step.observation.lower()
        assert hosted.worker.alive

        # a replay of the stalled episode (the training pool replays a failed step) fails at once
        runner.reset(7)
        started = time.monotonic()
        with pytest.raises(EnvStalled, match="not run again"):
            runner.step(call("get_reservation_details", reservation_id="STALL"))
        assert time.monotonic() - started < 1.0
        assert hosted.worker.alive  # nothing ran, nothing was killed
    finally:
        hosted.close()
