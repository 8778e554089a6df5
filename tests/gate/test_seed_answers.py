"""The survey asks each seed's env methods of one ``env_seed`` process (``gate_remote.seed_answers``): generate, both
solutions and, on a world seed, the world questions, each on a fresh env; the process goes on to the survey's next
seeds while it is within ``AHEAD_S``. The records must be those of the in-process path (one call per method), from
far fewer processes; each answer is used once, for the very question it answers.

Driven here without a sandbox: the probe's sub-calls run ``handler``'s own methods in this process, JSON in and out
(the real shim's processes are covered by tests/gate/test_probe_process.py and the gate tests)."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest

from trace_env import gate_remote, handler

TINY = (Path(__file__).resolve().parent / "envs" / "tiny_checked.py").read_text()
TRUTHFUL = (Path(__file__).resolve().parents[2] / "examples" / "envs" / "cancellation_eligibility.py").read_text()
# seed 3's generate raises; seed 5's skipping solution raises
FAULTY = TINY.replace("        rng = self.rng(seed)\n", "        if seed == 3:\n            raise ValueError('no seed 3')\n"
                      "        rng = self.rng(seed)\n", 1).replace(
    "    def capability_skipping_solution(self, scenario):\n",
    "    def capability_skipping_solution(self, scenario):\n        if scenario.seed == 5:\n            raise KeyError('skip5')\n", 1)
SEEDS = list(range(1, 7))
PARAMS = {"seeds": SEEDS, "parrot": SEEDS, "masked": SEEDS, "world": SEEDS[:4], "deadline_s": 60}
TIMINGS = {"generate_ms", "reset_ms", "step_ms"}


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


@pytest.fixture()
def calls() -> Any:
    """The probe's sub-calls served by this process's handler (as a fresh process would: no probe on the stack)."""
    counted: collections.Counter[str] = collections.Counter()
    seen: list[dict[str, Any]] = []

    def call(method: str, params: dict[str, Any]) -> Any:
        counted[method] += 1
        if method == "env_seed":
            seen.append(params)
        before = handler._state.get("probing")
        handler._state["probing"] = False
        try:
            return json.loads(json.dumps(handler.METHODS[method](json.loads(json.dumps(params)))))
        finally:
            handler._state["probing"] = before
    yield counted, seen, call
    gate_remote._calls.clear()


def _surveys(source: str, call: Any) -> tuple[Any, Any]:
    handler.METHODS["load"]({"source": source})
    local = handler.METHODS["survey"](dict(PARAMS))
    gate_remote.attach(call)
    return _untimed(local), _untimed(handler.METHODS["survey"](dict(PARAMS)))


@pytest.mark.parametrize("source", [TINY, TRUTHFUL, FAULTY], ids=["tiny", "truthful", "faulty"])
def test_the_survey_from_seed_answers_is_the_in_process_one(source: str, calls: Any) -> None:
    counted, seen, call = calls
    local, remote = _surveys(source, call)
    assert remote == local
    one_shots = {m: n for m, n in counted.items() if m.startswith("env_")}
    assert set(one_shots) <= {"env_seed", "env_derive_truths"}, one_shots  # no question asked twice
    assert one_shots["env_seed"] <= 2 and seen[0]["seeds"] == SEEDS and seen[0]["world"] == SEEDS[:4]


def test_the_faulty_env_is_reported_per_seed(calls: Any) -> None:
    _, remote = _surveys(FAULTY, calls[2])
    errors = {row["seed"]: row.get("error") for row in remote}
    assert errors[3] == "ValueError: no seed 3" and errors[5] == "KeyError: 'skip5'"
    assert [s for s, e in errors.items() if e] == [3, 5]


def test_without_time_ahead_each_seed_has_a_process_of_its_own(calls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate_remote, "AHEAD_S", -1.0)
    counted, _, call = calls
    local, remote = _surveys(TINY, call)
    assert remote == local and counted["env_seed"] == len(SEEDS)


def test_an_answer_is_used_once_for_its_own_question(calls: Any) -> None:
    counted, _, call = calls
    handler.METHODS["load"]({"source": TINY})
    gate_remote.attach(call)
    env = gate_remote.RemoteEnv([1, 2], frozenset({1}))
    scenario, _ = env.timed_generate(1)
    first = env.reference_solution(scenario)
    assert counted["env_solution"] == 0
    assert env.reference_solution(scenario) == first and counted["env_solution"] == 1  # asked again: a one-shot
    other = gate_remote.Scenario(**{**scenario.to_dict(), "user": {**scenario.user, "extra": 1}})
    env.capability_skipping_solution(other)  # another scenario: not env_seed's answer
    assert counted["env_solution"] == 2
    env.initial_state(scenario)
    env.truth_marks(1)
    assert counted["env_initial_state"] == 0 and counted["env_truth_marks"] == 0
    env.timed_generate(2)  # answered ahead by the first process
    assert counted["env_seed"] == 1


def test_a_reply_that_is_not_json_falls_back_to_generate(calls: Any) -> None:
    counted, _, call = calls
    handler.METHODS["load"]({"source": TINY})

    def failing(method: str, params: dict[str, Any]) -> Any:
        if method == "env_seed":
            counted[method] += 1
            raise gate_remote._named("SerializationError", "reply of 40000000 bytes is over 33554432")
        return call(method, params)
    gate_remote.attach(failing)
    env = gate_remote.RemoteEnv([1])
    scenario, ms = env.timed_generate(1)
    assert scenario.seed == 1 and ms >= 0 and counted["env_generate"] == 1
    env.reference_solution(scenario)
    assert counted["env_solution"] == 1


def test_a_bad_answer_is_refused(calls: Any) -> None:
    gate_remote.attach(lambda method, params: {"seeds": [{"seed": 1, "scenario": {}, "generate_ms": 1}]})
    with pytest.raises(gate_remote.BadAnswer):
        gate_remote.RemoteEnv([1]).timed_generate(1)
    gate_remote.attach(lambda method, params: {"seeds": [{"seed": 9}]})
    with pytest.raises(gate_remote.BadAnswer):
        gate_remote.RemoteEnv([1]).timed_generate(1)
