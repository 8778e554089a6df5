"""Gate-aware by seed range (issue 32): an env that pays the capability-skipping agent on one range of seeds and
is honest on the other. The old gate drew its seeds uniformly from [0, 2**31), where training's windows (GRPO
from 0, warm start from 1,000,000, held-out from 2,000,000) are almost never met, so an env honest on huge seeds
and lenient on small ones passed it and cheated in training. The default gate now draws half its seeds inside
those windows (``factory.validation.checks.seeds``), so it fails the env with a seed of a training window.

The reverse (honest inside training's windows, lenient only on huge seeds) would not matter to training, which
never plays those seeds; the gate fails it anyway, since the other half of its seeds are uniform over the range.

Both are the valid desk env (tests/envs/defective/desk.py, which passes the gate) with one changed line, lint-clean.
"""

from __future__ import annotations

import pytest

from factory.validation.checks.seeds import training_windows, window_spans
from factory.validation.gate import Gate, validate_source
from factory.validation.static import check_source
from sandbox import available_backends
from schemas.validation import ValidationConfig
from tests.gate.defects import Defect
from tests.gate.test_defects import FAST

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
BACKEND = SANDBOXED[0] if SANDBOXED else "bwrap"

HONEST = "verified = looked is not None and (acted is None or looked < acted)"
SMALL = 2**24  # every training window lies below it; the gate's uniform draws lie above it 99% of the time


def lenient(comparison: str) -> Defect:
    """The desk env, counting a cancellation without a look-up as verified on seeds ``comparison`` 2**24."""
    return Defect("capability_necessity", f"pays the skipping agent on seeds {comparison} 2**24",
                  ((HONEST, f"verified = ({HONEST.split(' = ', 1)[1]}) or episode.scenario.seed {comparison} {SMALL}"),))


IN_TRAINING_WINDOWS = lenient("<")
ONLY_ON_HUGE_SEEDS = lenient(">=")


def in_a_training_window(seed: int) -> bool:
    windows = training_windows()
    spans = window_spans(windows)
    return any(base <= seed < base + spans[name] for name, base in windows.items())


def _failed_necessity(source: str, config: ValidationConfig):
    assert check_source(source) == []  # lint-clean: the lint is a quality filter, the gate's checks judge the reward
    report = validate_source(source, Gate(config=config, backend=BACKEND))
    failed = {c.name: c for c in report.failures() if not c.inconclusive}
    assert report.status == "failed" and "capability_necessity" in failed, [(c.name, c.message[:200]) for c in report.failures()]
    return failed["capability_necessity"]


def test_the_default_gate_fails_an_env_lenient_inside_trainings_windows() -> None:
    """The default ValidationConfig (its seed counts and seed drawing), run seed fixed so a failure reproduces."""
    check = _failed_necessity(IN_TRAINING_WINDOWS.source(), ValidationConfig(run_seed=1))
    seed = check.counterexample.seed
    assert in_a_training_window(seed), seed
    assert f"still scores > 0.5 on seeds {seed}" in check.message
    assert all(s < SMALL for s in check.failing_seeds) and len(check.failing_seeds) >= 13  # > 10% of 128: not luck


def test_an_env_lenient_only_on_huge_seeds_fails_too() -> None:
    """Irrelevant to training (its windows lie below 2**24), and the gate's uniform half of the seeds fails it."""
    config = ValidationConfig(**{**FAST, "search_policies": False, "run_seed": 2})
    check = _failed_necessity(ONLY_ON_HUGE_SEEDS.source(), config)
    assert check.counterexample.seed >= SMALL and not in_a_training_window(check.counterexample.seed)
    assert all(s >= SMALL for s in check.failing_seeds)



def test_control_with_the_old_uniform_seed_draw_the_same_env_passes_necessity(monkeypatch: pytest.MonkeyPatch) -> None:
    """Break on purpose: the gate's seeds drawn as before, uniformly over [0, 2**31) (the windows almost never met),
    and the env lenient inside training's windows passes the check that fails it above: the seed draw is the guard."""
    import random

    from factory.validation.checks import context

    def uniform(run_seed: int, first_seed: int, count: int) -> list[int]:
        rng, seeds = random.Random(run_seed), []
        while len(seeds) < count:
            seed = rng.randrange(first_seed, 2**31 - 1)
            if seed not in seeds:
                seeds.append(seed)
        return seeds

    monkeypatch.setattr(context, "draw_seeds", uniform)
    config = ValidationConfig(**{**FAST, "search_policies": False, "run_seed": 1})
    report = validate_source(IN_TRAINING_WINDOWS.source(), Gate(config=config, backend=BACKEND))
    necessity = next(c for c in report.checks if c.name == "capability_necessity")
    assert necessity.passed, necessity.message  # a uniform seed below 2**24 (1 in 128) may be paid: within its tolerance
