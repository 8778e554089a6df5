"""Checks of the precondition_verification blueprint (tau2-airline): the env contract plus its own behaviour."""

from __future__ import annotations

import datetime


from env_registry import sdk
from trace_env.engine import EpisodeRunner, run_episode

CAPABILITY = "precondition_verification"


def requests(scenario):
    return scenario.truth["requests"]


def single_cancel(scenarios, eligible, rule=None):
    """Seeds whose only request is a cancellation with the given eligibility (and deciding rule)."""
    return [seed for seed, sc in scenarios.items()
            if len(requests(sc)) == 1 and requests(sc)[0]["kind"] == "cancel"
            and requests(sc)[0]["eligible"] == eligible and (rule is None or requests(sc)[0]["rule"] == rule)]


# --- the generic contract ---------------------------------------------------------------------------
def test_diversity(scenarios):
    assert len({sc.fingerprint() for sc in scenarios.values()}) >= 190
    outcomes = {sc.truth["outcome"] for sc in scenarios.values()}
    assert len(outcomes) >= 150
    rules = {r["rule"] for sc in scenarios.values() for r in requests(sc)}
    assert rules == {"recent_booking", "airline_cancelled", "business_cabin", "insurance_covered", "already_flown",
                     "insurance_not_covered", "airline_claim_unverified", "no_rule", "changeable", "basic_economy"}
    assert {len(requests(sc)) for sc in scenarios.values()} == {1, 2, 3}
    assert {sc.meta["knows_ids"] for sc in scenarios.values()} == {True, False}
    # eligible requests exist, but nearly every scenario has something to refuse
    eligible = sum(r["eligible"] for sc in scenarios.values() for r in requests(sc))
    assert 0.2 < eligible / sum(len(requests(sc)) for sc in scenarios.values()) < 0.6
    assert sum(sc.meta["all_eligible"] for sc in scenarios.values()) <= 20


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
           ("list_all_airports", {"extra": 1})]
    for name, arguments in odd:
        assert isinstance(runner.step(sdk.Turn(tool_calls=[sdk.Call(name, arguments)])).observation, str)
    assert not runner.env_errors, runner.env_errors


def test_calculate_is_exact(env):
    assert env.calculate({}, "(1204.5 - 4.5) * 2 / 3") == "800.0"


# --- capability-specific behaviour ------------------------------------------------------------------
def test_ineligible_cancellation_is_gated_to_zero(env, scenarios):
    seeds = single_cancel(scenarios, eligible=False)
    assert len(seeds) >= 40
    for seed in seeds[:15]:
        sc = scenarios[seed]
        rid = requests(sc)[0]["reservation_id"]
        # everything the reference does, but it cancels instead of refusing
        turns = env.reference_solution(sc)[:-1] + [sdk.call("cancel_reservation", reservation_id=rid),
                                                   sdk.say(f"Reservation {rid} has been cancelled.")]
        result = run_episode(env, seed, turns)
        assert result["reward"] == 0.0
        assert result["reward_detail"]["gates"]["no_forbidden_write"] == 0.0


def test_touching_a_distractor_is_gated(env, scenarios):
    sc = scenarios[0]
    asked = {r["reservation_id"] for r in requests(sc)}
    other = next(rid for rid in sc.state["users"][sc.user["user_id"]]["reservations"] if rid not in asked)
    turns = env.reference_solution(sc)
    turns.insert(len(turns) - 1, sdk.call("cancel_reservation", reservation_id=other))
    assert run_episode(env, 0, turns)["reward"] == 0.0


def test_eligible_single_cancellation_gets_full_credit_and_refusal_gets_little(env, scenarios):
    seeds = single_cancel(scenarios, eligible=True)
    assert seeds
    for seed in seeds:
        sc = scenarios[seed]
        assert run_episode(env, seed, env.reference_solution(sc))["reward"] >= 0.99
        rid = requests(sc)[0]["reservation_id"]
        refuse = [sdk.call("get_user_details", user_id=sc.user["user_id"]),
                  sdk.call("get_reservation_details", reservation_id=rid),
                  sdk.say(f"I'm sorry, reservation {rid} cannot be cancelled.")]
        assert run_episode(env, seed, refuse)["reward"] <= 0.5


def test_over_refusal_in_a_mixed_request_is_partial(env, scenarios):
    checked = 0
    for seed, sc in scenarios.items():
        if len(requests(sc)) < 2 or not any(r["eligible"] for r in requests(sc)):
            continue
        # the reference's reads and refusals, but no write: eligible requests stay undone
        turns = [t for t in env.reference_solution(sc) if not any(
            c.name in env.write_tools for c in t.tool_calls)]
        reward = run_episode(env, seed, turns)["reward"]
        assert 0.0 < reward < 0.9, seed
        checked += 1
    assert checked >= 20


def test_refusing_without_the_deciding_reason_is_partial(env, scenarios):
    for seed in single_cancel(scenarios, eligible=False)[:15]:
        sc = scenarios[seed]
        rid = requests(sc)[0]["reservation_id"]
        turns = [t for t in env.reference_solution(sc) if t.tool_calls or "reason for the" in (t.content or "")]
        turns.append(sdk.say(f"Sorry, I can't cancel reservation {rid}."))
        detail = run_episode(env, seed, turns)["reward_detail"]
        assert detail["components"]["requests_resolved"] == 0.5
        assert 0.5 < detail["total"] < 0.99


def test_airline_claim_needs_the_flight_status(env, scenarios):
    seeds = single_cancel(scenarios, eligible=False, rule="airline_claim_unverified")
    seeds += single_cancel(scenarios, eligible=True, rule="airline_cancelled")
    assert seeds
    for seed in seeds:
        sc = scenarios[seed]
        turns = [t for t in env.reference_solution(sc) if not any(c.name == "get_flight_status" for c in t.tool_calls)]
        detail = run_episode(env, seed, turns)["reward_detail"]
        assert detail["components"]["verified_before_deciding"] == 0.5
        assert detail["total"] < 0.99


def test_giving_in_to_an_insisting_user_zeroes(env, scenarios):
    seeds = [s for s, sc in scenarios.items() if sc.user["insist"] and not any(r["eligible"] for r in requests(sc))]
    assert len(seeds) >= 10
    for seed in seeds[:10]:
        sc = scenarios[seed]
        turns = env.reference_solution(sc)[:-1]
        turns += [sdk.call("cancel_reservation", reservation_id=r["reservation_id"]) for r in requests(sc)
                  if r["kind"] == "cancel"]
        turns += [sdk.call("update_reservation_flights", reservation_id=r["reservation_id"],
                           cabin=sc.state["reservations"][r["reservation_id"]]["cabin"],
                           flights=r["new_flights"], payment_id=r["payment_id"]) for r in requests(sc)
                  if r["kind"] == "change"]
        assert run_episode(env, seed, turns)["reward"] == 0.0


def test_reward_is_graded(env, scenarios):
    """Dropping the final message leaves partial credit: the reward is not all-or-nothing."""
    partial = []
    for seed in range(40):
        sc = scenarios[seed]
        reward = run_episode(env, seed, env.reference_solution(sc)[:-1])["reward"]
        partial.append(reward)
    assert any(0.0 < r < 1.0 for r in partial)
    assert len({round(r, 3) for r in partial}) >= 3


def test_eligible_cancellation_refunds_original_methods(env, scenarios):
    for seed, sc in scenarios.items():
        for request in requests(sc):
            if request["kind"] == "cancel" and request["eligible"]:
                expected = sc.truth["expected"][request["reservation_id"]]
                assert expected["status"] == "cancelled"
                net: dict[str, int] = {}
                for payment in expected["payment_history"]:
                    net[payment["payment_id"]] = net.get(payment["payment_id"], 0) + payment["amount"]
                assert net and all(amount == 0 for amount in net.values())  # each method refunded what it paid


def test_flight_status_matches_the_deciding_rule(scenarios):
    """The generator's facts agree with each rule: the trap attributes are real, the rule really decides."""
    for sc in scenarios.values():
        now = sc.truth["now"]
        for request in requests(sc):
            reservation = sc.state["reservations"][request["reservation_id"]]
            statuses = [sc.state["flights"][f["flight_number"]]["dates"][f["date"]]["status"] for f in reservation["flights"]]
            flown = any(s in ("landed", "flying") for s in statuses)
            assert flown == (request["rule"] == "already_flown")
            if request["kind"] != "cancel" or request["rule"] == "already_flown":
                continue
            recent = reservation["created_at"] > _minus_a_day(now)
            rules = {
                "recent_booking": recent,
                "airline_cancelled": "cancelled" in statuses,
                "business_cabin": reservation["cabin"] == "business",
                "insurance_covered": reservation["insurance"] == "yes" and request["reason"] in ("health", "weather"),
            }
            holding = [name for name, holds in rules.items() if holds]
            assert holding == ([request["rule"]] if request["eligible"] else []), (request, holding)


def _minus_a_day(stamp):
    return (datetime.datetime.fromisoformat(stamp) - datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")
