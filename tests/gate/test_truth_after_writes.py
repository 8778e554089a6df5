"""The truth checked after the agent's own writes (``stale_truth``): a reward that recomputes the truth from the
state the agent leaves pays "upgrade the cabin, then cancel" on a booking that could not be cancelled. The same env
graded against the truth as generated passes. Real sandbox, real episodes."""

from __future__ import annotations

from typing import Any

import pytest

from factory.validation.checks import CheckContext
from factory.validation.checks import truth as checks
from factory.validation.lanes import Lanes, opener
from schemas.validation import CheckResult, ValidationConfig
from tests.gate.defects import GATE_ENVS
from tests.gate.test_defects import FAST
from tests.gate.test_exploit_search import BACKEND, SANDBOXED

pytestmark = pytest.mark.skipif(not SANDBOXED, reason="no sandbox backend available")
SOURCE = (GATE_ENVS / "upgrade_then_cancel.py").read_text()
MOVED = '        allowed = self.derive_truth(scenario, episode.state)["allowed"]  # the defect: the truth of the final state'
FIXED = SOURCE.replace(MOVED, '        allowed = scenario.truth["allowed"]')


def stale_truth(source: str, **config: Any) -> CheckResult:
    settings = ValidationConfig(**{**FAST, "workers": 2, **config})
    open_env = opener(source, BACKEND, None, settings.load_timeout_s, settings.rpc_timeout_s)
    main = open_env()
    lanes = Lanes(open_env, main, settings.workers)
    try:
        ctx = CheckContext(lanes, settings, settings.run_seed or 0)
        result = checks.check_stale_truth(ctx)
        if result.counterexample is not None and result.counterexample.actions:  # replay it: the same reward comes back
            again = ctx.play(result.counterexample.seed, result.counterexample.actions)  # type: ignore[arg-type]
            assert again.reward == result.counterexample.reward
        return result
    finally:
        lanes.close()
        main.close()


def test_a_truth_the_agents_writes_move_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SOURCE.count(MOVED) == 1
    result = stale_truth(SOURCE)
    assert not result.passed and "own writes change the truth" in result.message, result.message
    names = [c["name"] for t in result.counterexample.actions for c in t.get("calls") or []]  # type: ignore[union-attr]
    assert names.index("change_cabin") < names.index("cancel_booking"), names  # upgrade, then cancel
    monkeypatch.setattr(checks, "after_writes", lambda ctx, rows: (None, 0))  # only reads checked: it passes
    assert stale_truth(SOURCE).passed


def test_the_truth_as_generated_passes() -> None:
    result = stale_truth(FIXED)
    assert result.passed, result.message
    assert "after other writes" in result.figure
