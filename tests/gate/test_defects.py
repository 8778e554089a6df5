"""Every defective env of the catalogue is rejected by the right check, with a counterexample; the base env,
the tiny fixture env and hostile envs behave. Runs the real gate in a real sandbox (bwrap, else docker)."""

from __future__ import annotations

import pytest

from factory.validation.checks.context import draw_seeds
from factory.validation.gate import CHECK_NAMES, Gate, validate_source
from sandbox import available_backends
from schemas.validation import ValidationConfig
from tests.gate.defects import BASES, DEFECTS, HOSTILE, hostile_source

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
BACKEND = SANDBOXED[0] if SANDBOXED else "bwrap"

# Fewer seeds and examples than the defaults, so the catalogue runs in minutes; a defect that needs more
# (a 2% branch) says so in its own config. The run seed is fixed so a failure here reproduces; the gate's own
# default draws it at random (tested in test_contract.py).
FAST = dict(solvability_seeds=40, necessity_seeds=40, diversity_seeds=40, determinism_seeds=8, fuzz_examples=30,
            grpo_seeds=8, leak_seeds=20, world_seeds=8, truth_seeds=12, paraphrase_seeds=6, exploit_seeds=8,
            exploit_confirm_seeds=12, user_path_seeds=2, generate_timing_seeds=32, run_seed=20260, search_policies=True)


def test_base_env_passes() -> None:
    report = validate_source(BASES["desk"].read_text(), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    assert report.passed, [(c.name, c.figure, c.message) for c in report.failures()]
    assert [c.name for c in report.checks] == CHECK_NAMES
    assert all(c.seeds > 0 for c in report.checks if c.name not in ("static",)), [(c.name, c.seeds) for c in report.checks]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DEFECTS))
def test_defect_is_rejected_by_the_right_check(name: str) -> None:
    defect = DEFECTS[name]
    report = validate_source(defect.source(), Gate(config=ValidationConfig(**{**FAST, **defect.config}), backend=BACKEND))
    assert not report.passed and report.status == "failed"
    failed = {c.name: c for c in report.failures() if not c.inconclusive}  # inconclusive is no rejection
    caught_by = defect.check if defect.check in failed else next((c for c in defect.instead if c in failed), None)
    assert caught_by is not None, f"{name}: expected {defect.check} to fail, failures were {sorted(failed)}"
    wrong = set(failed) - {defect.check, *defect.also, *defect.instead}
    assert not wrong, f"{name}: also rejected by {sorted(wrong)}: " + "; ".join(failed[w].message for w in sorted(wrong))
    check = failed[caught_by]
    assert check.message
    if caught_by == defect.check and defect.counterexample:
        assert check.counterexample is not None and check.counterexample.seed is not None, check
        if defect.needs_actions:
            assert check.counterexample.actions, f"{name}: counterexample has no actions"
        # replayed before it was reported: the same reward came back (not so for nondeterminism, by nature)
        if check.counterexample.reproduced is not None and caught_by != "determinism":
            assert check.counterexample.reproduced, f"{name}: {check.counterexample.detail}"


def test_solvability_lists_every_failing_seed() -> None:
    defect = DEFECTS["generate_raises_on_some_seeds"]
    config = ValidationConfig(**FAST)
    report = validate_source(defect.source(), Gate(config=config, backend=BACKEND))
    check = next(c for c in report.checks if c.name == "solvability")
    seeds = draw_seeds(config.run_seed, config.first_seed, 200)[: config.solvability_seeds]
    expected = [s for s in seeds if s % 13 == 6]
    assert expected and check.failing_seeds == expected
    assert ", ".join(map(str, expected[:3])) in check.message


def test_fuzzed_counterexample_is_shrunk() -> None:
    """Hypothesis shrinks the crash on malformed input to a single call."""
    report = validate_source(DEFECTS["crash_on_malformed_input"].source(), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    check = next(c for c in report.checks if c.name == "robustness")
    assert len(check.counterexample.actions) == 1
    assert "KeyError" in check.counterexample.detail


def test_budget_failure_ends_the_gate_early() -> None:
    report = validate_source(DEFECTS["generate_slow_on_every_seed"].source(), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    budget = next(c for c in report.checks if c.name == "budget")
    assert not budget.passed and not budget.skipped and "generate" in budget.message
    others = [c for c in report.checks if c.name not in ("static", "budget")]
    assert others and all(c.skipped and not c.passed for c in others), [(c.name, c.skipped) for c in others]
    assert report.failures() == [budget]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_gate_never_raises_for_a_hostile_env(name: str) -> None:
    config = ValidationConfig(**FAST, rpc_timeout_s=3, load_timeout_s=2)
    report = validate_source(hostile_source(name), Gate(config=config, backend=BACKEND))
    assert not report.passed
    assert [c.name for c in report.checks] == CHECK_NAMES
    failures = report.failures()
    assert failures and all(c.message for c in failures)
    if name.endswith("hangs"):  # a hang is a budget verdict (or, at import, a load failure); the rest is skipped
        assert {c.name for c in failures} == ({"interface"} if name == "import_hangs" else {"budget"})
        assert all(c.skipped for c in report.checks if c.name not in ("static", "interface", "budget"))


def test_env_that_fails_to_load_skips_the_rest_and_names_the_backend() -> None:
    report = validate_source(hostile_source("import_hangs"), Gate(config=ValidationConfig(load_timeout_s=2, run_seed=1), backend="auto"))
    assert report.backend in ("bwrap", "docker")
    interface = next(c for c in report.checks if c.name == "interface")
    assert not interface.passed and not interface.skipped and "load" in interface.message
    rest = [c for c in report.checks if c.name not in ("static", "interface")]
    assert all(c.skipped and c.message.startswith("not run") for c in rest)
    assert report.failures() == [interface]
