"""Checks of the structured_data_reasoning blueprint (tau2-retail): the env contract plus its own behaviour."""

from __future__ import annotations

import json

import pytest

from env_registry import sdk
from trace_env.engine import EpisodeRunner, run_episode

CAPABILITY = "structured_data_reasoning"


# --- the generic contract ---------------------------------------------------------------------------
def test_diversity(env):
    scenarios = [env.generate(seed) for seed in range(200)]
    assert len({s.fingerprint() for s in scenarios}) >= 190
    assert len({s.truth["new_item_id"] for s in scenarios}) >= 150
    assert len({s.meta["variant"] for s in scenarios}) == 5
    assert {s.meta["action"] for s in scenarios} == {"exchange", "modify"}


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
    "x" * 100_000,
]


@pytest.mark.parametrize("action", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_actions_never_raise(env, action):
    runner = EpisodeRunner(env)
    runner.reset(5)
    result = runner.step(action)
    assert isinstance(result.observation, str)
    assert not runner.env_errors, runner.env_errors


def test_reward_is_graded(env, runs):
    seed = 0
    scenario = env.generate(seed)
    turns = env.reference_solution(scenario)
    # Drop the price difference from the confirmation message: everything else is right.
    quiet = [sdk.say(t.content.split(" The price difference")[0] + " Shall I proceed?")
             if t.content and "price difference" in t.content else t for t in turns]
    reward = run_episode(env, seed, quiet)["reward"]
    assert 0.0 < reward < 1.0


# --- capability-specific behaviour --------------------------------------------------------------------
def test_near_miss_variant_gets_partial_credit(runs):
    """The skimmer's variant shares the salient option but misses another check: partial, not zero."""
    partial = [skip["reward_detail"]["components"]["variant_choice"] for _, skip in runs.values()]
    assert all(0.0 < p < 0.5 for p in partial)
    assert all(ref["reward_detail"]["components"]["variant_choice"] == 1.0 for ref, _ in runs.values())


def test_every_constraint_is_needed(env):
    """In each scenario the answer is the only variant passing every check, and the decoy is listed first."""
    for seed in range(60):
        scenario = env.generate(seed)
        truth = scenario.truth
        variants = list(scenario.state["products"][truth["product_id"]]["variants"].values())
        answer = scenario.state["products"][truth["product_id"]]["variants"][truth["new_item_id"]]
        assert answer["available"]
        dim, value = truth["salient"]
        first = next(v for v in variants if v["item_id"] != truth["old_item_id"] and v["options"][dim] == value)
        assert first["item_id"] != answer["item_id"]


def test_wrong_tool_on_the_order_is_gated(env):
    """Returning the item instead of exchanging it is a collateral write: reward 0."""
    for seed in range(20):
        scenario = env.generate(seed)
        if scenario.truth["tool"] == "exchange_delivered_order_items":
            break
    truth = scenario.truth
    turns = [t for t in env.reference_solution(scenario) if not any(
        c.name == truth["tool"] for c in t.tool_calls)]
    turns.insert(-1, sdk.call("return_delivered_order_items", order_id=truth["order_id"],
                              item_ids=[truth["old_item_id"]], payment_method_id=truth["payment_method_id"]))
    result = run_episode(env, scenario.seed, turns)
    assert result["reward_detail"]["gates"]["no_collateral_write"] == 0.0
    assert result["reward"] == 0.0


def test_wrong_payment_method_loses_state_credit(env):
    for seed in range(40):
        scenario = env.generate(seed)
        methods = scenario.state["users"][scenario.truth["user_id"]]["payment_methods"]
        others = [m for m, rec in methods.items() if m != scenario.truth["payment_method_id"] and rec["source"] != "gift_card"]
        if others:
            break
    truth = scenario.truth
    turns = []
    for turn in env.reference_solution(scenario):
        if turn.tool_calls and turn.tool_calls[0].name == truth["tool"]:
            turn = sdk.call(truth["tool"], **dict(turn.tool_calls[0].arguments, payment_method_id=others[0]))
        turns.append(turn)
    detail = run_episode(env, scenario.seed, turns)["reward_detail"]
    assert detail["components"]["variant_choice"] == 1.0
    assert detail["components"]["state_match"] == 0.0
    assert detail["components"]["payment_method"] == 0.0
    assert 0.5 < detail["total"] < 1.0
