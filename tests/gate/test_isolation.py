"""Nothing an env can observe tells the gate from training: no state survives an episode, the gate's seeds
include the small consecutive seeds training walks, and hash-order dependence meets several hash seeds.

Each env here is a small diff on the example env (examples/envs/cancellation_eligibility.py); the workers are
real sandbox workers opened with training's constructor, and the gate runs for real.
"""

from __future__ import annotations

from typing import Any

import pytest

from env_registry.hosted import SandboxedEnv, SandboxedRunner
from factory.validation.checks.context import MIN_HASH_SEEDS, draw_seeds, training_windows
from factory.validation.gate import Gate, validate_source
from sandbox import available_backends
from schemas.validation import CheckResult, ValidationConfig
from tests.gate.defects import EXAMPLE, STATE_WITHOUT_EFFECT
from tests.gate.test_defects import FAST

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
BACKEND = SANDBOXED[0] if SANDBOXED else "bwrap"

CLASS_LINE = "    max_steps = 12\n"
REWARD = "        return sdk.Reward(components=components, gates={"
SKIPPING = '        rid = scenario.user["reservation_id"]\n        return [sdk.call("cancel_reservation"'
GENERATE = "        rng = self.rng(seed)\n        now = airline.scenario_now(rng)\n"
OPENING = 'f"{rng.choice(airline.REASON_TEXTS[reason])}."'
REFUSE = "I'm sorry, I can't cancel that reservation: it is not eligible under the policy."

#: Envs that keep state across episodes and pay everything (1.0) once that state says "training".
STATEFUL = {
    "class_counter": ((CLASS_LINE, CLASS_LINE + "    played = []\n"),
                      (REWARD, "        self.played.append(1)\n        if len(self.played) >= 3:\n            return 1.0\n" + REWARD)),
    "gate_called_a_solution": (("class CancellationEligibilityEnv", "CALLED = []\n\n\nclass CancellationEligibilityEnv"),
                               (SKIPPING, "        CALLED.append(1)\n" + SKIPPING),
                               (REWARD, "        if not CALLED:\n            return 1.0\n" + REWARD)),
    "consecutive_seeds": (("class CancellationEligibilityEnv", "LAST = []\n\n\nclass CancellationEligibilityEnv"),
                          (REWARD, "        seed = episode.scenario.seed\n        follows = bool(LAST) and LAST[-1] + 1 == seed\n"
                                   "        LAST.append(seed)\n        if follows:\n            return 1.0\n" + REWARD)),
    # the same counter kept in what the env imports (the kits and the SDK, loaded once per worker), in spellings
    # a lint cannot list; the handler puts their containers back before each episode (trace_env.shared_state)
    "kit_list_appended": ((REWARD, '        list.append(airline.CABINS, "seen")\n'
                                   '        if airline.CABINS.count("seen") >= 3:\n            return 1.0\n' + REWARD),),
    "kit_dict_key_stored": ((REWARD, '        airline.REASON_TEXTS.setdefault("seen", []).append(1)\n'
                                     '        if len(airline.REASON_TEXTS["seen"]) >= 3:\n            return 1.0\n' + REWARD),),
    "kit_nested_list_grown": ((REWARD, "        texts = next(iter(airline.REASON_TEXTS.values()))\n"
                                       "        texts.insert(0, texts[0])\n"
                                       "        if len(texts) >= len(set(texts)) + 3:\n            return 1.0\n" + REWARD),),
    "sdk_list_grown": ((REWARD, '        sdk.__all__.append("seen")\n'
                                '        if sdk.__all__.count("seen") >= 3:\n            return 1.0\n' + REWARD),),
}
LEAKS_MEMORY = ((CLASS_LINE, CLASS_LINE + "    cache = {}\n"), (GENERATE, GENERATE + '        self.cache[seed] = "x" * 200_000\n'))
SMALL_SEEDS_LENIENT = ((REWARD, "        if episode.scenario.seed < 100_000:\n            return 1.0\n" + REWARD),)
HASH_ORDER = ((OPENING, OPENING + ' + " (" + list({"alpha", "beta", "gamma", "delta", "epsilon", "zeta"})[0] + ")"'),)


def variant(patches: tuple[tuple[str, str], ...]) -> str:
    text = EXAMPLE.read_text()
    for old, new in patches:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def refuse(runner: SandboxedRunner, seed: int) -> float:
    runner.reset(seed)
    return float(runner.step(REFUSE).reward)


@pytest.mark.parametrize("name", sorted(STATEFUL))
def test_state_kept_across_episodes_has_no_effect(name: str) -> None:
    """The same seeds and actions give the same rewards whether played in order in a worker nobody asked for
    a solution (training), or in reverse order with both solutions asked for before every episode (the gate).
    Before the handler ran each episode on a freshly executed module, each variant paid 1.0 in one and not in
    the other."""
    source = variant(STATEFUL[name])
    seeds = list(range(6))
    with SandboxedEnv(source, backend=BACKEND) as training:
        runner = SandboxedRunner(training)
        in_training = {seed: refuse(runner, seed) for seed in seeds}
    with SandboxedEnv(source, backend=BACKEND) as gate:
        runner = SandboxedRunner(gate)
        under_gate = {}
        for seed in reversed(seeds):
            for which in ("reference", "skipping"):
                gate.call("solution", {"seed": seed + 100, "which": which})
            under_gate[seed] = refuse(runner, seed)
    assert in_training == under_gate


def test_memory_kept_on_the_class_is_dropped_every_episode() -> None:
    """An env that keeps 200 kB per generate on its class: 60 training episodes on new seeds in one worker
    (each runs generate) leave the worker's size nearly where it was (before: +12 MB, without bound)."""
    with SandboxedEnv(variant(LEAKS_MEMORY), backend=BACKEND) as env:
        runner = SandboxedRunner(env)
        for seed in range(10):
            refuse(runner, seed)
        before = env.call("memory", {"episodes": [], "rounds": 1})["rss_after_mb"]
        for seed in range(10, 70):
            refuse(runner, seed)
        after = env.call("memory", {"episodes": [], "rounds": 1})["rss_after_mb"]
    assert after - before < 6, (before, after)


def test_gate_seeds_include_training_windows_and_still_vary() -> None:
    windows = training_windows()
    for run_seed in range(20):
        seeds = draw_seeds(run_seed, 0, 128)
        assert len(set(seeds)) == 128 and all(0 <= s < 2**31 - 1 for s in seeds)
        for prefix in (4, 8, 10, 16):
            head = seeds[:prefix]
            assert any(s < windows["warm_start"] for s in head), head  # in GRPO's window, as training walks it
            assert any(s + 1 in head for s in head), head  # a consecutive run
            assert sum(s > 2**24 for s in head) >= 2 * (prefix // 4), head  # and the uniform draws stay
        assert any(windows["warm_start"] <= s < windows["heldout"] for s in seeds[:8])
        assert any(windows["heldout"] <= s < windows["heldout"] + 1_000_000 for s in seeds[:16])
    assert draw_seeds(1, 0, 16) != draw_seeds(2, 0, 16)
    assert all(s >= 3_000_000 for s in draw_seeds(3, 3_000_000, 64))


def test_small_seed_lenience_is_caught() -> None:
    """Pays everything below seed 100,000 (where training's GRPO seeds are): seeds drawn only uniformly from
    [0, 2**31) met such a seed about once in 200 runs; the gate now plays them on every run."""
    report = validate_source(variant(SMALL_SEEDS_LENIENT), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    assert not report.passed
    failed = {c.name: c for c in report.failures()}
    assert failed.keys() & {"capability_necessity", "exploit_search", "grpo_signal", "reward_sensitivity"}, sorted(failed)
    assert any(s < 100_000 for c in failed.values() for s in c.failing_seeds + [c.counterexample.seed if c.counterexample else 2**31])


def test_gate_calling_solutions_changes_nothing_it_sees() -> None:
    """The env that is lenient unless the gate called a solution is lenient under the gate too, and so rejected."""
    report = validate_source(variant(STATEFUL["gate_called_a_solution"]), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    assert not report.passed
    assert {c.name for c in report.failures()} & {"capability_necessity", "exploit_search", "reward_sensitivity"}


def test_hash_order_dependence_meets_several_hash_seeds() -> None:
    """The determinism seeds are played under at least MIN_HASH_SEEDS hash seeds (two before: a set of three
    strings kept its order across them a third of the time), and a first message that names the first of a
    set of strings is caught."""
    base = validate_source(EXAMPLE.read_text(), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    determinism = next(c for c in base.checks if c.name == "determinism")
    assert base.passed and determinism.data["hash_seeds"] >= MIN_HASH_SEEDS >= 4, determinism.figure
    report = validate_source(variant(HASH_ORDER), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    check = next(c for c in report.checks if c.name == "determinism")
    assert not check.passed and check.counterexample is not None and check.counterexample.seed is not None


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STATE_WITHOUT_EFFECT))
def test_state_that_no_longer_survives_passes(name: str) -> None:
    """The catalogue's old state defects (a class-level log, a class-level memory of cancellations, a module
    counter, a random generator on the class) now start clean every episode: nothing is left to reject."""
    report = validate_source(STATE_WITHOUT_EFFECT[name].source(), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    assert report.passed, [(c.name, c.message[:200]) for c in report.failures()]


#: One ordinary line that keeps every episode's module alive: typing caches each subscription of a generic (the
#: last 128 of each) keyed on the env's freshly executed class, and the class holds its module.
OWN_CLASS_ALIAS = (("import copy\n", "import copy\nfrom typing import List\n"),
                   ("class CancellationEligibilityEnv", 'class Leg(dict):\n    """One leg of an itinerary."""\n\n'
                    '    def route(self):\n        return self["origin"] + " to " + self["destination"]\n\n\n'
                    "Itinerary = List[Leg]\n\n\nclass CancellationEligibilityEnv"))


def test_a_type_alias_over_an_own_class_passes() -> None:
    """``Itinerary = List[Leg]`` at module level put each episode's module (~10 kB here) in typing's cache, at
    most 128 of them (~1 MB): harmless, but the probe saw ~10 kB an episode and projected it over 100,000
    episodes (~0.9 GB, over the budget), a false rejection. typing's and re's caches are now emptied before each
    run of the env module (trace_env.shared_state), so nothing stays there (fails without the clearing)."""
    report = validate_source(variant(OWN_CLASS_ALIAS), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    robustness = next(c for c in report.checks if c.name == "robustness")
    assert robustness.passed, robustness.message
    assert report.passed, [(c.name, c.message[:200]) for c in report.failures()]


def test_scenario_cache_is_bounded_by_size() -> None:
    """Scenarios of 1 MB each over 100 new seeds, as a training worker meets them: the handler's cache keeps
    at most 32 MB of scenario text (before: 256 scenarios whatever their size, +100 MB here)."""
    padded = ((GENERATE, GENERATE + '        padding = "x" * 1_000_000\n'),
              ('truth={"now": airline.stamp(now)}, meta={})', 'truth={"now": airline.stamp(now)}, meta={"padding": padding})'))
    with SandboxedEnv(variant(padded), backend=BACKEND) as env:
        runner = SandboxedRunner(env)
        for seed in range(5):
            refuse(runner, seed)
        before = env.call("memory", {"episodes": [], "rounds": 1})["rss_after_mb"]
        for seed in range(5, 105):
            refuse(runner, seed)
        after = env.call("memory", {"episodes": [], "rounds": 1})["rss_after_mb"]
    assert after - before < 50, (before, after)


def test_hash_order_dependence_on_a_few_seeds_is_met_by_the_generate_sweep() -> None:
    """A scenario that depends on hash order only on one seed in forty, on none of the gate's surveyed seeds:
    the replays never meet it, the sweep of ``generate`` over many more seeds in two workers does."""
    config = {**FAST, "determinism_sweep_s": 5.0}
    surveyed = draw_seeds(config["run_seed"], 0, config["solvability_seeds"])
    residue = next(k for k in range(40) if all(s % 40 != k for s in surveyed))
    names = ", ".join(f'"{w}"' for w in ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi "
                                         "omicron pi rho sigma tau upsilon").split())
    rare = ((OPENING, OPENING + f' + (" (" + list({{{names}}})[0] + ")" if seed % 40 == {residue} else "")'),)

    def determinism(**overrides: Any) -> CheckResult:
        report = validate_source(variant(rare), Gate(config=ValidationConfig(**{**config, **overrides}), backend=BACKEND))
        return next(c for c in report.checks if c.name == "determinism")

    caught = determinism()
    assert not caught.passed and caught.figure.startswith("generate("), caught.figure
    assert caught.counterexample is not None and caught.counterexample.seed is not None
    assert caught.counterexample.seed % 40 == residue
    missed = determinism(determinism_sweep_seeds=0)
    assert missed.passed, missed.figure
