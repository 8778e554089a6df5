"""Checks of the tool_calling_precision blueprint (tau2-retail): the env contract plus its own behaviour."""

from __future__ import annotations

import json

import pytest

from env_registry import sdk
from trace_env.engine import EpisodeRunner, run_episode

CAPABILITY = "tool_calling_precision"


# --- the generic contract ---------------------------------------------------------------------------
def test_diversity(env):
    scenarios = [env.generate(seed) for seed in range(200)]
    assert len({s.fingerprint() for s in scenarios}) >= 190
    assert len({json.dumps(s.truth["call"], sort_keys=True) for s in scenarios}) >= 190
    assert {s.meta["variant"] for s in scenarios} == {"return_items", "exchange_items", "modify_items",
                                                     "cancel_order", "modify_payment"}
    assert {s.meta["order_ref"] for s in scenarios} == {"hash", "bare", "none"}


GARBAGE = [
    "",
    "{not json",
    '<tool_call>{"name": "x"',
    {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "nope", "arguments": "{}"}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "get_order_details", "arguments": json.dumps({"order_id": 7})}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "exchange_delivered_order_items", "arguments": "{}"}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "get_user_details", "arguments": [1, 2]}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "calculate", "arguments": {"expression": "(" * 5000}}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "calculate", "arguments": {"expression": "1/0"}}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "modify_pending_order_items", "arguments": {
        "order_id": "#W0000000", "item_ids": ["1", "1"], "new_item_ids": [], "payment_method_id": "x"}}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "modify_pending_order_address", "arguments": {
        "order_id": "#W0000000", "address1": "1 Main St", "address2": "", "city": "Austin", "state": "TX",
        "country": "USA", "zip": "78701"}}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "modify_user_address", "arguments": {
        "user_id": "nobody_1", "address1": "1 Main St", "address2": "", "city": "Austin", "state": "TX",
        "country": "USA", "zip": "78701"}}}]},
    "x" * 100_000,
]


@pytest.mark.parametrize("action", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_actions_never_raise(env, action):
    runner = EpisodeRunner(env)
    runner.reset(5)
    result = runner.step(action)
    assert isinstance(result.observation, str)
    assert not runner.env_errors, runner.env_errors


def test_reward_is_graded(env):
    """An order id without '#' on the first write, then the right call: everything but clean_writes."""
    for seed in range(50):
        scenario = env.generate(seed)
        if scenario.meta["variant"] != "cancel_order":
            break
    truth = scenario.truth
    turns = []
    for turn in env.reference_solution(scenario):
        if turn.tool_calls and turn.tool_calls[0].name == truth["tool"]:
            turns.append(sdk.call(truth["tool"], **dict(truth["call"], order_id=truth["order_id"][1:])))
        turns.append(turn)
    detail = run_episode(env, seed, turns)["reward_detail"]
    assert detail["components"]["clean_writes"] == 0.0
    assert detail["components"]["state_match"] == 1.0
    assert 0.0 < detail["total"] < 1.0


# --- capability-specific behaviour --------------------------------------------------------------------
def _with_write(env, scenario, **changes):
    """The reference solution with some arguments of its write call replaced."""
    truth = scenario.truth
    turns = []
    for turn in env.reference_solution(scenario):
        if turn.tool_calls and turn.tool_calls[0].name == truth["tool"]:
            turn = sdk.call(truth["tool"], **dict(truth["call"], **changes))
        turns.append(turn)
    return run_episode(env, scenario.seed, turns)["reward_detail"]


def _scenarios(env, variant, count=40):
    return [s for s in (env.generate(seed) for seed in range(count * 6)) if s.meta["variant"] == variant][:count]


def test_skipping_always_misses_an_argument(env):
    for seed in range(100):
        scenario = env.generate(seed)
        careless = env.capability_skipping_solution(scenario)
        writes = [c for t in careless for c in t.tool_calls if c.name == scenario.truth["tool"]]
        assert writes and writes[-1].arguments != scenario.truth["call"]


def test_first_listed_payment_method_is_wrong_for_returns(env):
    for scenario in _scenarios(env, "return_items", 10):
        methods = scenario.state["users"][scenario.truth["user_id"]]["payment_methods"]
        first = next(iter(methods))
        assert first != scenario.truth["call"]["payment_method_id"]
        detail = _with_write(env, scenario, payment_method_id=first)
        assert detail["components"]["payment_method"] == 0.0
        assert detail["components"]["state_match"] == 0.0
        assert 0.0 < detail["total"] <= 0.5


def test_item_of_the_other_variant_loses_item_credit(env):
    for variant in ("return_items", "exchange_items", "modify_items"):
        for scenario in _scenarios(env, variant, 5):
            truth = scenario.truth
            order = scenario.state["orders"][truth["order_id"]]
            wanted = truth["call"]["item_ids"]
            twin = next(i for i in order["items"] if i["item_id"] in wanted and i["name"] == truth["twin_name"])
            other = next(i["item_id"] for i in order["items"] if i["name"] == twin["name"] and i["item_id"] != twin["item_id"])
            swapped = sorted(other if i == twin["item_id"] else i for i in wanted)
            detail = _with_write(env, scenario, item_ids=swapped)
            assert detail["components"]["item_ids"] == 0.0
            assert detail["components"]["state_match"] == 0.0
            assert detail["total"] <= 0.5


def test_cancelling_the_lookalike_order_scores_zero(env):
    for scenario in _scenarios(env, "cancel_order", 5):
        detail = _with_write(env, scenario, order_id=scenario.truth["lookalike_order_id"])
        assert detail["gates"]["no_collateral_write"] == 0.0
        assert detail["total"] == 0.0


def test_wrong_cancel_reason_is_partial(env):
    for scenario in _scenarios(env, "cancel_order", 5):
        other = {"no longer needed": "ordered by mistake", "ordered by mistake": "no longer needed"}
        detail = _with_write(env, scenario, reason=other[scenario.truth["call"]["reason"]])
        assert detail["components"]["cancel_reason"] == 0.0
        assert 0.0 < detail["total"] <= 0.5


def test_named_card_beats_lookalike_card(env):
    for scenario in _scenarios(env, "modify_payment", 8):
        truth = scenario.truth
        methods = scenario.state["users"][truth["user_id"]]["payment_methods"]
        chosen = methods[truth["call"]["payment_method_id"]]
        same_kind = [m for m, r in methods.items() if r["source"] == chosen["source"]]
        assert len(same_kind) == 2 and same_kind[1] == chosen["id"]
        detail = _with_write(env, scenario, payment_method_id=same_kind[0])
        assert detail["total"] <= 0.5
