"""Checks of the multi_step_task_completion blueprint (tau2-airline): the env contract plus its own behaviour."""

from __future__ import annotations


import pytest

from env_registry import sdk
from trace_env.engine import EpisodeRunner, run_episode

CAPABILITY = "multi_step_task_completion"


def tasks(scenario):
    return scenario.truth["tasks"]


# --- the generic contract ---------------------------------------------------------------------------
def test_diversity(scenarios):
    assert len({sc.fingerprint() for sc in scenarios.values()}) >= 190
    assert len({sc.truth["outcome"] for sc in scenarios.values()}) >= 190
    assert {t["kind"] for sc in scenarios.values() for t in tasks(sc)} == {
        "cancel", "change_flight", "add_bags", "update_passenger", "upgrade_cabin"}
    assert {len(tasks(sc)) for sc in scenarios.values()} == {2, 3, 4}
    asked = [tuple(sc.meta["asks_totals"]) for sc in scenarios.values()]
    assert {(), ("charged",), ("refunded",)} <= set(asked)
    assert len({sc.meta["variant"] for sc in scenarios.values()}) >= 60


def test_garbage_never_raises(env):
    runner = EpisodeRunner(env)
    garbage = ["", "{not json", '<tool_call>{"name": "x"', '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
               "y" * 100_000, {"content": None, "tool_calls": [{"function": {"name": "calculate", "arguments": [1]}}]},
               {"tool_calls": "not a list"}]
    for seed, action in enumerate(garbage):
        runner.reset(seed)
        assert isinstance(runner.step(action).observation, str)
    for schema in env.tools():
        params = schema["function"].get("parameters", {}).get("properties", {})
        for arguments in ({key: {"nested": [1, 2]} for key in params} or {"unexpected": 1}, {}):
            runner.reset(5)
            assert isinstance(runner.step(sdk.Turn(tool_calls=[sdk.Call(schema["function"]["name"], arguments)])).observation, str)
    # schema-valid but odd values reach the tools: they answer with errors, never crash
    runner.reset(7)
    odd = [("update_reservation_flights", {"reservation_id": "NOPE00", "cabin": "economy", "flights": [{}], "payment_id": "x"}),
           ("calculate", {"expression": "(" * 3000 + "1" + ")" * 3000}),
           ("calculate", {"expression": "1/0"}), ("calculate", {"expression": "2 * (3 + 4"}),
           ("get_flight_status", {"flight_number": "HAT999", "date": "2024-05-01"}),
           ("list_all_airports", {"extra": 1}),
           ("update_reservation_passengers", {"reservation_id": "NOPE00", "passengers": [{}]}),
           ("update_reservation_baggages", {"reservation_id": "NOPE00", "total_baggages": 1, "nonfree_baggages": 0,
                                            "payment_id": "x"})]
    for name, arguments in odd:
        assert isinstance(runner.step(sdk.Turn(tool_calls=[sdk.Call(name, arguments)])).observation, str)
    assert not runner.env_errors, runner.env_errors


def test_calculate_is_exact(env):
    assert env.calculate({}, "(1204.5 - 4.5) * 2 / 3") == "800.0"
    assert env.calculate({}, "-3 + 2 * 4") == "5.0"


# --- capability-specific behaviour ------------------------------------------------------------------
def test_every_sub_task_changes_the_database(env, scenarios):
    """No sub-task is already satisfied at the start, so each component measures real work."""
    for sc in scenarios.values():
        for task, expected in zip(tasks(sc), sc.truth["expected"]):
            initial = sc.state["reservations"][task["reservation_id"]]
            assert {k: v for k, v in initial.items() if k in expected} != {
                k: v for k, v in expected.items() if k != "net_payments"}
        assert len({t["reservation_id"] for t in tasks(sc)}) == len(tasks(sc))


def test_skipping_does_only_the_first_sub_task(runs):
    for seed, (_, skip) in runs.items():
        components = skip["reward_detail"]["components"]
        done = [v for k, v in components.items() if k.startswith("task")]
        assert done[0] == 1.0 and not any(done[1:]), (seed, components)
        assert components["final_summary"] == pytest.approx(1 / len(done))


def test_partial_completion_gets_partial_credit(env, scenarios):
    """All but the last sub-task: more than the skipper, less than the reference."""
    checked = 0
    for seed, sc in scenarios.items():
        if len(tasks(sc)) < 3:
            continue
        last = tasks(sc)[-1]
        turns = [t for t in env.reference_solution(sc)
                 if not any(c.name in env.write_tools and c.arguments.get("reservation_id") == last["reservation_id"]
                            for c in t.tool_calls)]
        detail = run_episode(env, seed, turns)["reward_detail"]
        n = len(tasks(sc))
        assert detail["components"][f"task{n}_{last['kind']}"] == 0.0
        assert 0.5 < detail["total"] < 0.95, (seed, detail)
        checked += 1
        if checked == 25:
            break
    assert checked == 25


def test_summary_and_totals_are_graded(env, scenarios):
    with_totals = [s for s, sc in scenarios.items() if sc.truth["totals"]]
    assert len(with_totals) >= 20
    for seed in with_totals[:10]:
        sc = scenarios[seed]
        turns = env.reference_solution(sc)
        summary = turns[-1].content
        cut = summary.index(" In total")
        detail = run_episode(env, seed, turns[:-1] + [sdk.say(summary[:cut])])["reward_detail"]
        assert detail["components"]["stated_totals"] == 0.0
        assert detail["components"]["final_summary"] == 1.0
        assert 0.7 < detail["total"] < 1.0
        # no wrap-up at all
        assert run_episode(env, seed, turns[:-1])["reward"] < 1.0


def test_stray_write_is_gated(env, scenarios):
    for seed in range(10):
        sc = scenarios[seed]
        asked = {t["reservation_id"] for t in tasks(sc)}
        other = next(r for r in sc.state["users"][sc.user["user_id"]]["reservations"] if r not in asked)
        turns = env.reference_solution(sc)
        turns.insert(len(turns) - 1, sdk.call("cancel_reservation", reservation_id=other))
        assert run_episode(env, seed, turns)["reward"] == 0.0
        # cancelling a reservation that was only meant to be edited is stray too
        edit = next((t for t in tasks(sc) if t["kind"] != "cancel"), None)
        if edit:
            turns = env.reference_solution(sc)
            turns.insert(len(turns) - 1, sdk.call("cancel_reservation", reservation_id=edit["reservation_id"]))
            assert run_episode(env, seed, turns)["reward"] == 0.0


def test_wrong_amounts_fail_the_sub_task(env, scenarios):
    """A bag update with the wrong number of paid bags is graded as not done."""
    checked = 0
    for seed, sc in scenarios.items():
        bags = [t for t in tasks(sc) if t["kind"] == "add_bags" and t["money"] > 0]
        if not bags:
            continue
        task = bags[0]
        turns = env.reference_solution(sc)
        for turn in turns:
            for call in turn.tool_calls:
                if call.name == "update_reservation_baggages" and call.arguments["reservation_id"] == task["reservation_id"]:
                    call.arguments["nonfree_baggages"] += 1
        detail = run_episode(env, seed, turns)["reward_detail"]
        index = tasks(sc).index(task) + 1
        assert detail["components"][f"task{index}_add_bags"] == 0.0
        assert detail["total"] < 1.0
        checked += 1
    assert checked >= 10
