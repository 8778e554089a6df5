"""The validation gate: the tiny env passes. (The static check is tested in tests/test_static.py; broken variants,
each rejected by the right check, hostile envs and the gate's settings are tested in tests/gate.)"""

from __future__ import annotations

import pytest

from factory.validation.gate import validate_source
from sandbox import available_backends
from schemas.validation import ValidationConfig

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
BACKEND = SANDBOXED[0] if SANDBOXED else "bwrap"
FAST = ValidationConfig(solvability_seeds=40, necessity_seeds=40, diversity_seeds=40, fuzz_examples=25, grpo_seeds=8)


def test_tiny_env_passes_the_gate(tiny_source: str) -> None:
    report = validate_source(tiny_source, config=FAST, backend=BACKEND)
    assert report.passed, [(c.name, c.message) for c in report.failures()]
    assert report.backend == BACKEND and report.backend_warning is None
    assert [c.name for c in report.checks] == [
        "static", "interface", "schema_fidelity", "determinism", "diversity", "solvability", "capability_necessity",
        "reward_sensitivity", "grpo_signal", "robustness", "reward_bounds", "budget",
    ]
    by_name = {c.name: c for c in report.checks}
    assert by_name["solvability"].seeds == 40 and by_name["determinism"].seeds == FAST.determinism_seeds
    assert by_name["grpo_signal"].episodes >= FAST.grpo_seeds * FAST.grpo_group_size


def test_syntax_error_is_reported_as_one_and_nothing_else_runs() -> None:
    report = validate_source("from trace_env import sdk\n\ndef broken(:\n    pass\n", backend=BACKEND)
    static = report.checks[0]
    assert not report.passed and static.name == "static" and not static.passed
    assert static.figure == "syntax error at line 3" and "forbidden" not in static.figure
    assert all(c.skipped for c in report.checks[1:]) and report.failures() == [static]
