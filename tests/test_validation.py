"""The validation gate: the tiny env passes; each deliberately broken variant fails the right check,
with a counterexample. Runs on the default sandbox (auto: docker where a daemon answers, else bwrap)."""

from __future__ import annotations

import pytest

from factory.validation.gate import validate_source
from sandbox import available_backends
from schemas.validation import ValidationConfig

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
BACKEND = SANDBOXED[0] if SANDBOXED else "bwrap"
FAST = ValidationConfig(solvability_seeds=40, necessity_seeds=40, diversity_seeds=100, fuzz_examples=25, grpo_seeds=8)

DEFECTS = {
    "unseeded_randomness": (
        "rng = self.rng(seed)", "import random\n        rng = random.Random()", "determinism", False,
    ),
    "constant_reward": (
        "return sdk.Reward(\n", "return sdk.Reward(components={'flat': 1.0})\n        sdk.Reward(\n", "grpo_signal", False,
    ),
    "reward_out_of_bounds": (
        "return sdk.Reward(\n", "return 2.0 if cancelled else 0.0\n        sdk.Reward(\n", "reward_bounds", True,
    ),
    "schema_type_differs": (
        "    def evaluate(self, episode):",
        "    def tools(self):\n        schemas = super().tools()\n"
        "        schemas[1]['function']['parameters']['properties']['reservation_id']['type'] = 'integer'\n"
        "        return schemas\n\n    def evaluate(self, episode):",
        "schema_fidelity", False,
    ),
    "reference_fails": (
        "turns = [sdk.call(\"get_reservation_details\", reservation_id=rid)]",
        "return [sdk.say('I cannot help with that.')]", "solvability", True,
    ),
    "capability_not_necessary": (
        "return [sdk.call(\"cancel_reservation\", reservation_id=rid), sdk.say(\"Done, cancelled.\")]",
        "return self.reference_solution(scenario)", "capability_necessity", True,
    ),
    "crash_on_malformed_input": (
        "        if reservation_id not in state[\"reservations\"]:\n            raise sdk.ToolError(\"Reservation not found\")\n"
        "        return state[\"reservations\"][reservation_id]\n",
        "        return state[\"reservations\"][reservation_id]\n", "robustness", True,
    ),
    "endless_episode": ("max_steps = 6", "max_steps = 10**6", "robustness", False),
    "hidden_forbidden_import": (
        "from env_registry import sdk", "from env_registry import sdk\n_load = getattr(__builtins__, '__imp' + 'ort__')",
        "static", False,
    ),
}


def broken(tiny_source: str, defect: str) -> str:
    old, new, _, _ = DEFECTS[defect]
    assert tiny_source.count(old) == 1, f"patch anchor for {defect} not found exactly once"
    return tiny_source.replace(old, new)


def test_tiny_env_passes_the_gate(tiny_source: str) -> None:
    report = validate_source(tiny_source, config=FAST, backend=BACKEND)
    assert report.passed, [(c.name, c.message) for c in report.failures()]
    assert report.backend == BACKEND and report.backend_warning is None
    assert [c.name for c in report.checks] == [
        "static", "interface", "schema_fidelity", "determinism", "diversity", "reward_bounds", "solvability",
        "capability_necessity", "grpo_signal", "robustness", "budget",
    ]


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_broken_variant_is_rejected_by_the_right_check(tiny_source: str, defect: str) -> None:
    _, _, check_name, has_actions = DEFECTS[defect]
    report = validate_source(broken(tiny_source, defect), config=FAST, backend=BACKEND)
    assert not report.passed
    failed = {c.name: c for c in report.failures()}
    assert check_name in failed, f"{defect}: expected {check_name} to fail, failures were {sorted(failed)}"
    check = failed[check_name]
    assert check.message
    if check_name != "static":
        assert check.counterexample is not None or check_name in {"robustness", "grpo_signal"} and check.figure
    if has_actions:
        assert check.counterexample is not None and check.counterexample.seed is not None
        assert check.counterexample.actions, f"{defect}: counterexample has no actions"


def test_fuzzed_counterexample_is_shrunk(tiny_source: str) -> None:
    """Hypothesis shrinks the crash on malformed input to a single call."""
    report = validate_source(broken(tiny_source, "crash_on_malformed_input"), config=FAST, backend=BACKEND)
    check = next(c for c in report.checks if c.name == "robustness")
    assert len(check.counterexample.actions) == 1
    assert "KeyError" in check.counterexample.detail
