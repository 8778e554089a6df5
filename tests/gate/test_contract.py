"""The gate's own contract: seeds drawn at random (and repeated by run_seed), the same verdict on one lane or
several, workers started like training's, counterexamples re-checked, hints that name real options, wall time
that counts a sleep, an exploit library that can be extended. Real sandboxes, real gate runs."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from env_registry.hosted import SandboxedEnv
from factory.validation import gate as gate_module
from factory.validation.gate import Gate, validate_source
from fuzz import exploits
from fuzz.policies import reference_mutants
from sandbox import available_backends
from schemas.validation import CheckResult, ValidationConfig, ValidationReport
from tests.gate.defects import BASES, DEFECTS, EVALUATE_RETURN, VALID
from tests.gate.test_defects import FAST
from trace_env import gate_probe

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
BACKEND = SANDBOXED[0] if SANDBOXED else "bwrap"
ROOT = Path(__file__).resolve().parents[2]
TIMED = {"budget", "robustness"}  # figures that hold times or memory sizes


def verdict(report: ValidationReport) -> list[Any]:
    """Everything a report says, less what depends on the machine (seconds, times, memory, and how many seeds
    the determinism sweep reached in its time)."""
    out = []
    for c in report.checks:
        example = c.counterexample.model_dump(exclude={"reproduced"}) if c.counterexample else None
        data = {k: v for k, v in c.data.items() if k not in ("episodes", "swept")}
        figure = re.sub(r"swept on \d+ more seeds", "swept on N more seeds", c.figure)
        out.append((c.name, c.passed, c.skipped, c.message if c.name not in TIMED else "", figure if c.name not in TIMED else "",
                    c.failing_seeds, example, data, c.seeds, c.episodes if c.name not in TIMED else 0))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(VALID))
def test_envs_the_old_gate_rejected_pass(name: str) -> None:
    """An argument-level decision, a yes/no answer, a long task with per-item credit, a [-1, 1] reward and an
    env on its own tool domain that ends on a tool's outcome: each passes every check."""
    report = validate_source(VALID[name].read_text(), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    assert report.passed, [(c.name, c.figure, c.message) for c in report.failures()]
    assert report.off_target == (name == "library_desk")
    if name == "signed_reward":
        assert report.env_info["reward_range"] == [-1.0, 1.0]


def test_one_lane_and_three_lanes_give_the_same_report() -> None:
    """The work spread over several workers changes nothing but the time it takes (a defective env, so the
    failing checks' counterexamples are compared too)."""
    source = DEFECTS["reward_ignores_which_reservation"].source()
    one = validate_source(source, Gate(config=ValidationConfig(**{**FAST, "workers": 1}), backend=BACKEND))
    three = validate_source(source, Gate(config=ValidationConfig(**{**FAST, "workers": 3}), backend=BACKEND))
    assert (one.workers, three.workers) == (1, 3)
    assert verdict(one) == verdict(three)
    assert not one.passed and "reward_sensitivity" in {c.name for c in one.failures()}


def test_seeds_are_drawn_anew_and_repeat_with_run_seed() -> None:
    config = {**FAST, "run_seed": None}
    first = validate_source(DEFECTS["generate_raises_on_some_seeds"].source(), Gate(config=ValidationConfig(**config), backend=BACKEND))
    second = validate_source(DEFECTS["generate_raises_on_some_seeds"].source(), Gate(config=ValidationConfig(**config), backend=BACKEND))
    assert first.run_seed is not None and second.run_seed is not None and first.run_seed != second.run_seed
    failing = [next(c for c in r.checks if c.name == "solvability").failing_seeds for r in (first, second)]
    assert failing[0] != failing[1] and all(s % 13 == 6 for f in failing for s in f)
    again = validate_source(DEFECTS["generate_raises_on_some_seeds"].source(),
                            Gate(config=ValidationConfig(**{**FAST, "run_seed": first.run_seed}), backend=BACKEND))
    assert next(c for c in again.checks if c.name == "solvability").failing_seeds == failing[0]


def test_every_worker_hashes_strings_its_own_way() -> None:
    """Training's workers get a random hash seed as the gate's do, from the one constructor: a check that
    compares two hash seeds is no condition an env can detect."""
    source = BASES["tiny"].read_text()
    seeds = []
    for _ in range(3):
        with SandboxedEnv(source, backend=BACKEND) as env:
            seeds.append(env.hash_seed)
    assert len(set(seeds)) == 3 and not set(seeds) & {1, 2}


def test_gate_only_behaviour_is_seen_and_training_behaves_as_the_gate_saw() -> None:
    """An env that pays only after the reference was asked for fails the one-path check; an env that reads
    the old gate's hash seeds now sees training's conditions under the gate too, and fails there as it would
    in training."""
    aware = validate_source(DEFECTS["gate_only_behaviour"].source(), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    solvability = next(c for c in aware.checks if c.name == "solvability")  # the flag never survives into an episode
    assert not aware.passed and not solvability.passed and solvability.counterexample.seed is not None
    with SandboxedEnv(DEFECTS["gate_only_behaviour"].source(), backend=BACKEND) as env:  # training: the same 0.0
        turns = env.call("solution", {"seed": 5, "which": "reference"})
        env.call("reset", {"seed": 5})
        assert [env.call("step", {"action": t})["reward"] for t in turns][-1] == 0.0
    hashing = validate_source(DEFECTS["reads_the_gate_hash_seed"].source(), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    assert not next(c for c in hashing.checks if c.name == "solvability").passed
    with SandboxedEnv(DEFECTS["reads_the_gate_hash_seed"].source(), backend=BACKEND) as env:  # as training opens it
        seed = hashing.checks[5].failing_seeds[0] if hashing.checks[5].failing_seeds else 7
        turns = env.call("solution", {"seed": seed, "which": "reference"})
        env.call("reset", {"seed": seed})
        rewards = [env.call("step", {"action": t})["reward"] for t in turns]
    assert rewards[-1] == 0.0


def test_an_episode_the_gate_cuts_short_is_graded_as_training_grades_it() -> None:
    """The gate's exploits, mutants and mixtures often stop before the episode ends; training caps turns the same
    way (``truncate``). An env that pays only when ``episode.ended_by`` is set (never under the old gate, whose
    unfinished episodes were graded with ``ended_by`` None) sees the same episode both ways."""
    source = BASES["desk"].read_text().replace(EVALUATE_RETURN, "        return 0.0 if episode.ended_by is None else 1.0")
    with SandboxedEnv(source, backend=BACKEND) as env:
        turns = env.call("solution", {"seed": 5, "which": "reference"})[:1]  # a read, then the agent stops
        gate = env.call("episode", {"seed": 5, "turns": turns})
        env.call("reset", {"seed": 5})
        for turn in turns:
            env.call("step", {"action": turn})
        training = env.call("truncate", {})
    assert gate["ended_by"] == "actions_exhausted"
    assert training["info"]["ended_by"] == "max_steps"
    assert gate["reward"] == training["reward"] == 1.0


#: The desk env whose reward ignores which reservation was cancelled on two seeds in three: there a corrupted
#: reservation id keeps the reward, on the third it loses it: reward_sensitivity fails with passing seeds beside
#: the failing ones, and must name a failing one.
SOMETIMES_IGNORES_WHICH = (
    ('        cancelled = episode.state["reservations"][rid]["status"] == "cancelled"',
     "        sloppy = episode.scenario.seed % 3 != 0\n"
     '        cancelled = episode.state["reservations"][rid]["status"] == "cancelled" or (\n'
     '            sloppy and any(r["status"] == "cancelled" for r in episode.state["reservations"].values()))'),
    ('        others = [r for key, r in episode.state["reservations"].items() if key != rid and r["status"] == "cancelled"]',
     '        others = [] if sloppy else [r for key, r in episode.state["reservations"].items() if key != rid and r["status"] == "cancelled"]'),
    ('        acted = episode.first_index("cancel_reservation", reservation_id=rid)',
     '        acted = episode.first_index("cancel_reservation", **({} if sloppy else {"reservation_id": rid}))'),
)


def played_as_in_training(env: SandboxedEnv, seed: int, turns: list[Any]) -> float:
    """The reward of ``turns`` on ``seed`` as training gets it: reset, one step a turn until the episode ends,
    ``truncate`` if the agent stops first."""
    env.call("reset", {"seed": seed})
    for turn in turns:
        out = env.call("step", {"action": turn})
        if out["terminated"] or out["truncated"]:
            return float(out["reward"])
    return float(env.call("truncate", {})["reward"])


def test_counterexamples_are_replayed_before_they_are_reported() -> None:
    """The reward_sensitivity counterexample proves what it says. Replayed in a worker of its own, its actions
    get the reward it reports, and on the seed it names no mutant of its kind falls below the reference by the
    drop the check requires (the old gate could name a seed on which the reward fell, a passing seed)."""
    source = BASES["desk"].read_text()
    for old, new in SOMETIMES_IGNORES_WHICH:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    config = ValidationConfig(**FAST)
    report = validate_source(source, Gate(config=config, backend=BACKEND))
    check = next(c for c in report.checks if c.name == "reward_sensitivity")
    example = check.counterexample
    assert not check.passed and example is not None and example.reproduced is True and example.reward is not None, check
    kind = example.detail.split(":")[0]
    assert kind == "corrupt" and f"seed {example.seed}:" in check.message, (kind, check.message)
    assert re.search(r"corrupt [1-9]\d*/\d+", check.figure), check.figure  # passing seeds exist to be named by mistake
    writes = {"cancel_reservation"}
    with SandboxedEnv(source, backend=BACKEND) as env:
        turns = env.call("solution", {"seed": example.seed, "which": "reference"})
        reference = played_as_in_training(env, example.seed, turns)
        replayed = played_as_in_training(env, example.seed, example.actions)
        mutants = [m for k, m in reference_mutants(turns, writes) if k == kind]  # as the check makes them
        rewards = [env.call("episode", {"seed": example.seed, "turns": m, "templates": True, "with_messages": False})["reward"]
                   for m in mutants]
    count = sum(1 for turn in turns for call in turn["calls"] if call["name"] in writes)
    need = min(config.sensitivity_min_drop, 0.5 / max(1, count))
    assert replayed == example.reward
    assert mutants and all(r > reference - need for r in [replayed, *rewards]), (example.seed, reference, replayed, rewards)
    exploit = validate_source(DEFECTS["work_destroyed_afterwards"].source(), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    found = next(c for c in exploit.checks if c.name == "exploit_search")
    assert not found.passed and found.counterexample.reproduced is True and found.counterexample.transcript
    assert any(m.get("role") == "tool" for m in found.counterexample.transcript)


def test_an_added_exploit_is_played_on_every_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The library is extensible: a registered policy is played and judged like the built-in ones."""
    monkeypatch.setitem(exploits.EXPLOITS, "say_goodbye_twice", exploits.Exploit(
        "say_goodbye_twice", "policy", "two goodbyes", lambda x: [[exploits.say("Goodbye."), exploits.say("Bye!")]]))
    report = validate_source(BASES["tiny"].read_text(), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    found = next(c for c in report.checks if c.name == "exploit_search")
    assert "say_goodbye_twice" in found.data["per_exploit"] and found.data["closest"]
    assert found.passed


def test_hints_name_options_that_exist() -> None:
    """Every `--set NAME` and `--option` a gate message suggests exists (ValidationConfig fields, and the
    options of `factory validate --help`)."""
    from typer.testing import CliRunner

    from factory.cli import app

    help_text = CliRunner().invoke(app, ["validate", "--help"], env={"COLUMNS": "200"}).output
    fields = set(ValidationConfig.model_fields)
    sources = [p for p in (ROOT / "factory" / "validation").rglob("*.py") if p.name != "static.py"]
    sources += [ROOT / "fuzz" / "exploits.py", ROOT / "fuzz" / "paraphrase.py"]
    problems = []
    for path in sources:
        text = path.read_text()
        for name in re.findall(r"--set ([a-z_]+)", text):
            if name not in fields and name.upper() != name:
                problems.append(f"{path.name}: --set {name}")
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", text):
            if option not in help_text and option != "--set":
                problems.append(f"{path.name}: {option}")
    assert not problems, problems


def test_wall_time_counts_a_sleep_and_not_a_wait_for_the_cpu() -> None:
    watch = gate_probe.Stopwatch()
    time.sleep(0.05)
    assert watch.ms() >= 45  # the old CPU-time stopwatch read ~0 here
    watch = gate_probe.Stopwatch()
    sum(i * i for i in range(200_000))
    busy = watch.ms()
    assert 0 < busy < 2_000


def test_a_step_that_sleeps_is_over_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Env modules cannot import time (the lint); the sandbox is the boundary, so with the lint out of the way
    a sleeping tool must still fail the budget: the gate times wall time less waiting for a CPU."""
    monkeypatch.setattr(gate_module, "check_source", lambda source: [])
    source = BASES["tiny"].read_text().replace(
        '    def get_reservation_details(self, state, reservation_id):\n',
        '    def get_reservation_details(self, state, reservation_id):\n        import time\n        time.sleep(0.12)\n')
    report = validate_source(source, Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    budget = next(c for c in report.checks if c.name == "budget")
    assert not budget.passed and "step" in budget.message


def test_a_tool_slow_on_a_few_arguments_fails_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool that takes 0.25 s (2.5 times the step budget) on about one reservation in twenty-five: the 95th
    percentile stays low, and the slowest call, re-timed, is as slow, so it fails; with the old allowance
    (no call over 5x the budget) it passed."""
    monkeypatch.setattr(gate_module, "check_source", lambda source: [])
    source = BASES["tiny"].read_text().replace("class TinyCancel", "SLOWED = []\n\n\nclass TinyCancel").replace(
        '    def get_reservation_details(self, state, reservation_id):\n',
        '    def get_reservation_details(self, state, reservation_id):\n        import time\n'
        '        if not SLOWED and sum(map(ord, str(reservation_id))) % 25 == 0:\n'
        '            SLOWED.append(1)\n            time.sleep(0.25)\n')  # once an episode: no step near the hard 5x abort

    def budget(**overrides: float) -> CheckResult:
        report = validate_source(source, Gate(config=ValidationConfig(**{**FAST, **overrides}), backend=BACKEND))
        return next(c for c in report.checks if c.name == "budget")

    slow = budget()
    assert not slow.passed and "step" in slow.message and "at most" in slow.message, slow.figure
    assert slow.counterexample is not None and slow.counterexample.seed is not None
    assert budget(budget_confirmed_factor=5.0).passed
