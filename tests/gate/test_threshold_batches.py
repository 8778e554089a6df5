"""The hidden-threshold probe asks its independent questions in batches (``env_derive_truths``): the same
findings as asking them one process each, from far fewer one-shot processes.

``_one_at_a_time`` is the probe as it was before batching (one ``derive_truth`` per question, in leaf and factor
order, the first finding returned): the oracle. The batched probe runs against ``gate_remote.RemoteEnv`` with a
sub-call that serves ``env_derive_truth`` and ``env_derive_truths`` with ``handler``'s own ``derive_each`` (JSON
in and out, as across the sandbox's pipes) and counts the calls; the envs have rules the agent is or is not told,
on integers and floats, errors on one side of a boundary, and several changing leaves.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from trace_env import gate_remote
from trace_env.gate_thresholds import (BISECTIONS, FACTORS, MAX_LEAVES, _PAIR, _decision, _get, _leaves, _near,
                                       _numbers, _set, hidden_threshold)
from trace_env.sdk import Scenario, canonical_json, numbers_in


def _one_at_a_time(env: Any, scenario: Scenario, shown: str) -> str:
    """The probe before batching (one derive_truth per question), verbatim but for names."""
    state = json.loads(canonical_json(scenario.state))
    truth_of = lambda: env.derive_truth(scenario, state)  # noqa: E731

    def at(path: Any, value: float, original: float, integer: bool) -> Any:
        _set(state, path, int(value) if integer else value)
        try:
            return truth_of()
        except Exception as exc:  # noqa: BLE001
            return {"error": type(exc).__name__}
        finally:
            _set(state, path, int(original) if integer else original)
    try:
        base = truth_of()
    except Exception:  # noqa: BLE001
        return "none"
    if base is None:
        return "undeclared"
    decided = _decision(base)
    said = numbers_in(shown)
    pairs = {(key, float(number)) for key, number in _PAIR.findall(shown)}
    shown_leaves = [(p, v) for p, v in _leaves(state) if any(_near(v, s) for s in said)]
    shown_leaves.sort(key=lambda leaf: (str(leaf[0][-1]), leaf[1]) not in pairs)
    for path, value in shown_leaves[:MAX_LEAVES]:
        integer = isinstance(_get(state, path), int)
        for factor in FACTORS:
            moved = round(value * factor) if integer else value * factor
            if moved == value or _decision(at(path, moved, value, integer)) == decided:
                continue
            inside, outside = value, moved
            for _ in range(BISECTIONS):
                middle = round((inside + outside) / 2) if integer else (inside + outside) / 2
                if middle in (inside, outside):
                    break
                if _decision(at(path, middle, value, integer)) == decided:
                    inside = middle
                else:
                    outside = middle
            amounts = {inside, outside, *_numbers(at(path, inside, value, integer)),
                       *_numbers(at(path, outside, value, integer))}
            if not any(_near(q, s) for q in amounts for s in said):
                where = ".".join(str(k) for k in path)
                return (f"the decision changes when state.{where} goes from {inside:g} to {outside:g} (it is {value:g}), "
                        "and no number the agent is shown marks that boundary")
            break
    return "none"


class Refunds:
    """Refund when the amount is at least ``limit`` (and, with ``cap``, the fee at most ``cap``); raises below
    ``error_below``; ``declared=False``: no derive_truth (it answers None)."""

    def __init__(self, limit: float, cap: float | None = None, error_below: float | None = None,
                 declared: bool = True) -> None:
        self.limit, self.cap, self.error_below, self.declared = limit, cap, error_below, declared

    def derive_truth(self, scenario: Scenario, state: Any) -> Any:
        if not self.declared:
            return None
        order = state["orders"][0]
        if self.error_below is not None and order["amount"] < self.error_below:
            raise ValueError("too small")
        ok = order["amount"] >= self.limit and (self.cap is None or order["fee"] <= self.cap)
        return {"decision": "refund" if ok else "refuse", "refund": order["amount"] * 0.9 if ok else 0}


STATE = {"orders": [{"amount": 694, "fee": 12.5}], "balance": 300}
SHOWN = 'order: {"amount": 694, "fee": 12.5}; balance 300'
CASES = [
    (Refunds(900), SHOWN),                              # a hidden integer threshold above
    (Refunds(500), SHOWN),                              # a hidden one below
    (Refunds(500), SHOWN + "; refunds from 500 up"),    # the same, stated
    (Refunds(0, cap=10.0), SHOWN),                      # a hidden float threshold on the fee
    (Refunds(0, cap=10.0), SHOWN + " (fees up to 10)"),
    (Refunds(650, cap=15.0), SHOWN),                    # two changing leaves: the first in order is reported
    (Refunds(500, error_below=450), SHOWN),             # an error counts as its own decision
    (Refunds(0), SHOWN),                                # no rule
    (Refunds(900, declared=False), SHOWN),              # undeclared
]


def _remote(env: Any, calls: list[str], batch_fails: bool = False) -> gate_remote.RemoteEnv:
    """A RemoteEnv whose sub-calls run ``env`` here, JSON in and out, counted by method."""
    def call(method: str, params: dict[str, Any]) -> Any:
        calls.append(method)
        params = json.loads(json.dumps(params))
        scenario_of = lambda: gate_remote.scenario_from(params["scenario"])  # noqa: E731
        if method == "env_derive_truth":
            return json.loads(json.dumps(env.derive_truth(scenario_of(), params["state"])))
        assert method == "env_derive_truths"
        if batch_fails:
            raise RuntimeError("the batch's process ended")
        return json.loads(json.dumps(gate_remote.derive_each(lambda: env, scenario_of, params["states"])))
    gate_remote.attach(call)
    return gate_remote.RemoteEnv()


@pytest.fixture(autouse=True)
def _detach() -> Any:
    yield
    gate_remote._calls.clear()


@pytest.mark.parametrize("env,shown", CASES)
def test_batched_findings_are_those_of_one_question_per_process(env: Refunds, shown: str) -> None:
    scenario = Scenario(seed=1, state=json.loads(json.dumps(STATE)), user={}, truth={})
    counted: list[str] = []

    class Counting:
        def derive_truth(self, scenario: Scenario, state: Any) -> Any:
            counted.append("one")
            return env.derive_truth(scenario, state)
    expected = _one_at_a_time(Counting(), scenario, shown)
    calls: list[str] = []
    assert hidden_threshold(_remote(env, calls), scenario, shown) == expected
    assert hidden_threshold(env, scenario, shown) == expected  # the in-process path (a loop), too
    if expected not in ("none", "undeclared") or len(counted) > 2:
        assert len(calls) <= 3 + BISECTIONS and len(calls) < len(counted), (calls, len(counted))
    assert scenario.state == STATE


def test_the_findings_differ_between_the_cases() -> None:
    """The oracle is not vacuous: hidden, stated, no rule and undeclared all occur."""
    scenario = Scenario(seed=1, state=json.loads(json.dumps(STATE)), user={}, truth={})
    found = [_one_at_a_time(env, scenario, shown) for env, shown in CASES]
    assert "undeclared" in found and "none" in found
    assert any("state.orders.0.amount goes from 899 to 900" in f for f in found), found
    assert any("state.orders.0.fee" in f for f in found), found


def test_a_failed_batch_is_asked_one_process_per_question() -> None:
    scenario = Scenario(seed=1, state=json.loads(json.dumps(STATE)), user={}, truth={})
    env = Refunds(900)
    calls: list[str] = []
    assert hidden_threshold(_remote(env, calls, batch_fails=True), scenario, SHOWN) == _one_at_a_time(env, scenario, SHOWN)
    assert "env_derive_truths" in calls and calls.count("env_derive_truth") > 10


def test_large_states_go_in_several_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate_remote, "BATCH_CHARS", 100)
    states = [{"pad": "x" * 60, "n": n} for n in range(5)]
    assert [len(b) for b in gate_remote._batches(states)] == [1, 1, 1, 1, 1]
    monkeypatch.setattr(gate_remote, "BATCH_CHARS", 10_000)
    assert [len(b) for b in gate_remote._batches(states)] == [5]
