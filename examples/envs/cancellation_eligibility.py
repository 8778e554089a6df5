"""Example env: cancel a τ² airline reservation only when the policy allows it.

A short, complete env built on the airline kit. The kit brings the world: a seeded database in τ²'s record
shapes (``AirlineWorld``), the fourteen faithful tools (``AirlineTools``) and the cancellation rules
(``cancellation_check``). The env writes only what the capability adds: a scenario, the user, the reward and
two solutions. The truth is computed by ``derive_truth`` from the state, so the gate can recompute it after the
agent's reads (a truth that goes stale would make the right answer lose). Validate it with
``factory validate examples/envs/cancellation_eligibility.py``.
"""

import copy

from trace_env import sdk
from trace_env.kits import tau2_airline as airline
from trace_env.kits import text


class CancellationEligibilityEnv(airline.AirlineTools, sdk.TaskEnv):
    capability = "cancellation_eligibility"
    target = "tau2-airline"
    description = (
        "A customer asks to cancel a reservation and gives a reason. The agent must read the reservation, cancel "
        "only if a cancellation rule allows it (booked within 24 hours, business cabin, insurance covering the "
        "reason, no flight flown yet), tell the user the refund, and otherwise refuse naming the rule."
    )
    tool_names = ["get_user_details", "get_reservation_details", "get_flight_status", "cancel_reservation",
                  "transfer_to_human_agents"]
    write_tools = frozenset({"cancel_reservation"})
    terminal_tools = frozenset({"transfer_to_human_agents"})
    max_steps = 12

    def generate(self, seed):
        rng = self.rng(seed)
        now = airline.scenario_now(rng)
        world = airline.AirlineWorld(rng, now)
        user = world.user()
        for _ in range(rng.randint(0, 2)):  # other trips on the profile
            world.reservation(user, cabin=rng.choice(airline.CABINS), trip="one_way", timing="future", created="old",
                              insurance="no")
        reservation = world.reservation(
            user, cabin=rng.choice(airline.CABINS), trip=rng.choice(["one_way", "round_trip"]),
            timing=rng.choice(["future", "future", "future", "flown"]),
            created=rng.choice(["recent", "near_miss", "old", "old"]), insurance=rng.choice(["yes", "no"]))
        reason = rng.choice(["personal", "health", "weather"])
        rid = reservation["reservation_id"]
        scenario = sdk.Scenario(
            seed=seed, state=world.state(user),
            user={"user_id": user["user_id"], "reservation_id": rid, "reason": reason,
                  "opening": f"Hi, I'm {user['user_id']}. Please cancel reservation {rid}: "
                             f"{rng.choice(airline.REASON_TEXTS[reason])}.",
                  "facts": [[["user id"], f"It's {user['user_id']}."], [["reservation"], f"It's {rid}."]]},
            truth={"now": airline.stamp(now)}, meta={})
        scenario.truth = self.derive_truth(scenario, scenario.state)
        scenario.meta["variant"] = scenario.truth["rule"]
        return scenario

    def derive_truth(self, scenario, state):
        """The decision the records support: what the agent can work out from what the tools show it."""
        rid, now = scenario.user["reservation_id"], airline.to_time(scenario.truth["now"])
        reservation = state["reservations"][rid]
        check = airline.cancellation_check(reservation, state["flights"], now, scenario.user["reason"])
        return {"now": scenario.truth["now"], "eligible": check.eligible, "rule": check.rule,
                "refund": airline.paid_total(reservation)}

    def system_prompt(self, scenario):
        return airline.system_prompt(airline.to_time(scenario.truth["now"]),
                                     "- When you refuse, tell the user which rule stands in the way.")

    def first_user_message(self, scenario):
        return scenario.user["opening"]

    def evaluate(self, episode):
        scenario, truth, rid = episode.scenario, episode.scenario.truth, episode.scenario.user["reservation_id"]
        cancelled = episode.state["reservations"][rid]["status"] == "cancelled"
        expected = copy.deepcopy(scenario.state)
        airline.cancel_reservation(expected, rid)  # one cancellation, as the target records it (refunds included)
        decided = episode.first_index("cancel_reservation")
        read = episode.first_index("get_reservation_details", reservation_id=rid)
        verified = read is not None and (decided is None or read < decided)
        components = {}
        spoken = text.normalise(episode.assistant_text)
        if truth["eligible"]:
            exact = episode.state["reservations"][rid] == expected["reservations"][rid]
            components.update(cancelled=float(exact), refund_told=float(episode.said(truth["refund"])))
        else:
            words = airline.RULE_WORDS.get(truth["rule"], [["24 hours", "24-hour"], ["insurance", "business"]])
            refused = text.has_any(spoken, text.REFUSAL_WORDS)
            components["rule_explained"] = float(refused and text.hits_groups(spoken, words))
        others = [key for key, record in episode.state["reservations"].items()
                  if key != rid and record != scenario.state["reservations"][key]]
        # Gates: cancelling what the policy forbids, or touching another reservation, zeroes the reward; deciding
        # without reading the reservation first halves it (reading alone earns nothing).
        return sdk.Reward(components=components, gates={"allowed": 0.0 if cancelled and not truth["eligible"] else 1.0,
                                                        "others_untouched": 0.0 if others else 1.0,
                                                        "verified_first": 1.0 if verified else 0.5})

    def reference_solution(self, scenario):
        rid, truth = scenario.user["reservation_id"], scenario.truth
        reservation = scenario.state["reservations"][rid]
        turns = [sdk.call("get_reservation_details", reservation_id=rid)]
        if not truth["eligible"]:
            refusal = airline.explain_refusal(truth["rule"], reservation, scenario.state["flights"], scenario.user["reason"])
            return turns + [sdk.say(refusal)]
        plan = airline.explain_cancellation(truth["rule"], reservation, scenario.user["reason"])
        return turns + [sdk.say(f"{plan} Shall I go ahead?"), sdk.call("cancel_reservation", reservation_id=rid),
                        sdk.say(f"Done: reservation {rid} is cancelled and {text.money(truth['refund'])} is on its way "
                                "back to the original payment method.")]

    def capability_skipping_solution(self, scenario):
        """Cancels straight away, without reading the reservation or weighing the rules."""
        rid = scenario.user["reservation_id"]
        return [sdk.call("cancel_reservation", reservation_id=rid), sdk.say(f"Reservation {rid} is cancelled.")]


ENV = CancellationEligibilityEnv
