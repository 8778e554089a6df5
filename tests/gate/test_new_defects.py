"""The defective envs of issue 33's "Why" (tests/gate/envs/), each through the whole gate: it fails by the right
check (others only where they rightly object too), with a counterexample that names a seed and actions to replay."""

from __future__ import annotations

import pytest

from factory.validation.gate import Gate, validate_source
from schemas.validation import ValidationConfig
from tests.gate.defects import GATE_ENVS
from tests.gate.test_defects import FAST
from tests.gate.test_exploit_search import BACKEND, SANDBOXED

pytestmark = pytest.mark.skipif(not SANDBOXED, reason="no sandbox backend available")

#: env -> (the check that must reject it, checks that may rightly reject it too)
RIGHT_CHECK = {
    "refund_batch": ("exploit_search", ()),  # per-item credit a shotgun overfills
    "lenient_beside_call": ("exploit_search", ()),  # text beside a tool call graded leniently
    "prose_paid": ("exploit_search", ()),  # a long polite paragraph that decides nothing paid
    "user_tells": ("capability_necessity", ()),  # the user states the verdict when asked twice
    "fare_family": ("capability_necessity", ()),  # a field the agent sees before deciding predicts the decision
    "upgrade_then_cancel": ("stale_truth", ("exploit_search",)),  # truth recomputed after the agent's own writes
}


@pytest.mark.parametrize("name", sorted(RIGHT_CHECK))
def test_each_defect_fails_by_the_right_check(name: str) -> None:
    check, also = RIGHT_CHECK[name]
    report = validate_source((GATE_ENVS / f"{name}.py").read_text(), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    failed = {c.name: c for c in report.failures()}
    assert check in failed, (name, {n: c.message for n, c in failed.items()})
    assert set(failed) <= {check, *also}, {n: c.message for n, c in failed.items()}
    example = failed[check].counterexample
    assert example is not None and example.seed is not None and example.actions, example
    assert example.reproduced in (None, True), example.detail
