"""The validation gate: a valid small env passes, and the previous release's tiny env is rejected for the reward
hole the exploit search finds. (The static check is tested in tests/test_static.py; broken variants, each rejected
by the right check, hostile envs and the gate's settings are tested in tests/gate.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from factory.validation.gate import Gate, validate_source
from sandbox import available_backends
from schemas.validation import ValidationConfig

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
BACKEND = SANDBOXED[0] if SANDBOXED else "bwrap"
FAST = ValidationConfig(solvability_seeds=40, necessity_seeds=40, diversity_seeds=40, fuzz_examples=25, grpo_seeds=8, run_seed=7)
CHECKED = Path(__file__).resolve().parent / "gate" / "envs" / "tiny_checked.py"


def test_previous_release_tiny_env_is_rejected_for_a_reward_hole(tiny_source: str) -> None:
    """tests/envs/tiny_cancel.py never reads what the agent says: reading the reservation and stopping earns
    0.75 of the reference (all of it on seeds to refuse). The old gate passed it; the exploit search does not."""
    report = validate_source(tiny_source, Gate(config=FAST, backend=BACKEND))
    assert {c.name for c in report.failures()} == {"exploit_search"}
    found = next(c for c in report.checks if c.name == "exploit_search")
    assert found.data["per_exploit"]["read_and_shrug"]["mean_share"] > 0.5
    assert found.counterexample.reproduced and found.counterexample.transcript


def test_tiny_env_passes_the_gate() -> None:
    report = validate_source(CHECKED.read_text(), Gate(config=FAST, backend=BACKEND))
    assert report.passed, [(c.name, c.message) for c in report.failures()]
    assert report.backend == BACKEND and report.backend_warning is None
    assert [c.name for c in report.checks] == [
        "static", "interface", "schema_fidelity", "world_fidelity", "determinism", "diversity", "solvability", "stale_truth",
        "paraphrase", "capability_necessity", "reward_sensitivity", "exploit_search", "grpo_signal", "user_paths",
        "robustness", "reward_bounds", "budget",
    ]
    by_name = {c.name: c for c in report.checks}
    assert by_name["solvability"].seeds == 40 and by_name["determinism"].seeds == FAST.determinism_seeds
    assert by_name["grpo_signal"].episodes >= FAST.grpo_seeds * FAST.grpo_group_size


def test_syntax_error_is_reported_as_one_and_nothing_else_runs() -> None:
    report = validate_source("from trace_env import sdk\n\ndef broken(:\n    pass\n", Gate(backend=BACKEND))
    static = report.checks[0]
    assert not report.passed and static.name == "static" and not static.passed
    assert static.figure == "syntax error at line 3" and "forbidden" not in static.figure
    assert all(c.skipped for c in report.checks[1:]) and report.failures() == [static]
