"""The verdict is a property of the env, not of the run seed: a CI-sized batch of the 100 run seeds per run.

Each CI run takes batch ``b`` (``TRACE_GATE_SEED_BATCH``, else the day of the year modulo 50) and validates the
example env, the test catalogue's valid envs and two of its defective envs with run seeds from ``2b`` and
``2b + 1`` of 0..99, so fifty days walk all hundred; ``bench/bench_gate_seeds.py --seeds 100`` runs them all at
once. A valid env must pass, or be inconclusive by design (a figure on its threshold), never fail; a defective
env must fail by its check. A run seed that breaks this is named in the assertion: ``--set run_seed=N`` repeats it.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest

from factory.validation.gate import Gate, validate_source
from sandbox import available_backends
from schemas.validation import ValidationConfig, ValidationReport
from tests.gate.defects import BASES, DEFECTS, VALID
from tests.gate.test_defects import FAST

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
BACKEND = SANDBOXED[0] if SANDBOXED else "bwrap"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "envs" / "cancellation_eligibility.py"
BATCH = int(os.environ.get("TRACE_GATE_SEED_BATCH", datetime.date.today().timetuple().tm_yday % 50))
RUN_SEEDS = [2 * BATCH % 100, (2 * BATCH + 1) % 100]
# the defects whose verdicts this batch samples: two of the catalogue, a different pair each batch
SAMPLED = [sorted(DEFECTS)[(2 * BATCH + k) % len(DEFECTS)] for k in range(2)]


def _why(report: ValidationReport) -> list[tuple[str, str]]:
    return [(c.name, c.message[:300]) for c in report.checks if c.required and not c.passed and not c.skipped]


def _valid_verdict(source: str, config: dict, run_seed: int) -> None:
    report = validate_source(source, Gate(config=ValidationConfig(**{**config, "run_seed": run_seed}), backend=BACKEND))
    assert report.status in ("passed", "inconclusive"), (f"run_seed={run_seed}", report.status, _why(report))


@pytest.mark.parametrize("run_seed", RUN_SEEDS)
def test_the_example_env_passes_on_this_batch_of_run_seeds(run_seed: int) -> None:
    _valid_verdict(EXAMPLE.read_text(), {}, run_seed)


@pytest.mark.parametrize("name", sorted(VALID) + ["desk"])
def test_valid_catalogue_envs_pass_on_this_batch_of_run_seeds(name: str) -> None:
    source = (VALID[name] if name in VALID else BASES[name]).read_text()
    _valid_verdict(source, FAST, RUN_SEEDS[0])


@pytest.mark.parametrize("name", SAMPLED)
def test_sampled_defects_fail_by_their_check_on_this_batch_of_run_seeds(name: str) -> None:
    defect = DEFECTS[name]
    config = ValidationConfig(**{**FAST, **defect.config, "run_seed": RUN_SEEDS[1]})
    report = validate_source(defect.source(), Gate(config=config, backend=BACKEND))
    failed = {c.name for c in report.failures() if not c.inconclusive}
    assert report.status == "failed" and failed & {defect.check, *defect.instead}, (f"run_seed={RUN_SEEDS[1]}", _why(report))
