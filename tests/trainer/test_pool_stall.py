"""A step that stalls (the env's own fault: a backtracking regex holds the interpreter in C) ends its episode at the
step deadline with the stall's one-line message, and the training pool does not replay it: a replay could only
stall again (envs are deterministic), so before this it cost a fresh worker and a replay of the episode twice
over for the same error. The slot's next episode runs on a fresh worker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from env_registry import hosted
from tests.trainer.conftest import register_env_file
from trace_env.sdk import call
from trainer.envpool import EnvPool

TINY = (Path(__file__).resolve().parents[1] / "envs" / "tiny_cancel.py").read_text()
STALLING = TINY.replace(
    '    def get_reservation_details(self, state, reservation_id):\n',
    '    def get_reservation_details(self, state, reservation_id):\n'
    '        if reservation_id == "STALL":\n'
    '            import re\n'
    '            re.match(r"(a|aa)+$", "a" * 200 + "b")\n', 1)
DEADLINE_S = 3.0


def test_a_stalled_step_ends_its_episode_without_a_replay(trainer_registry: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    assert STALLING != TINY
    path = tmp_path / "stalling_cancel.py"
    path.write_text(STALLING.replace('capability = "tiny_cancel"', 'capability = "stalling_cancel"'))
    env_id = register_env_file(trainer_registry, path, validate=False)
    monkeypatch.setattr(hosted, "STEP_TIMEOUT_S", DEADLINE_S)
    monkeypatch.setattr(hosted, "STALLS", hosted._StallMemo())
    with EnvPool(env_id, sandbox="bwrap", audit_share=0.0) as pool:
        [first] = pool.reset([0], [7])
        assert first.reply is not None, first.error
        started = time.monotonic()
        [stalled] = pool.step([0], [call("get_reservation_details", reservation_id="STALL")])
        took = time.monotonic() - started
        assert stalled.reply is None and stalled.error is not None
        assert "the env stalled" in stalled.error and "seed 7" in stalled.error and "\n" not in stalled.error, stalled.error
        assert pool.replayed == 0, f"the stalled episode was replayed {pool.replayed} times"
        assert took < DEADLINE_S + 2.0, f"the stalled step took {took:.1f} s"
        # the slot's next episode runs, on a fresh worker
        [again] = pool.reset([0], [8])
        assert again.reply is not None, again.error
        [step] = pool.step([0], [call("get_reservation_details", reservation_id="NOPE")])
        assert step.reply is not None and not step.reply.terminated, step
