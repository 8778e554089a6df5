"""A small valid env that the gate must pass, and the base every defective variant in tests/gate/defects.py
patches with one defect. (Not a blueprint: big enough to vary, small enough to validate in seconds.)

A customer asks to cancel one of their reservations without saying which; the agent must ask, look the
reservation up, and cancel it only if the fare allows it (business cabin, or travel insurance), else
explain why not. Distractor reservations share the customer's profile.
"""

from env_registry import sdk

CABINS = ["basic_economy", "economy", "business"]
LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
FIRST_NAMES = ["Mia", "Noah", "Sofia", "Ethan", "Amelia", "Liam", "Chen", "Aarav", "Fatima", "Mateo", "Yara", "Kenji"]
CITIES = ["Boston", "Denver", "Austin", "Seattle", "Chicago", "Phoenix", "Atlanta", "Miami"]
CONFIRMED = ("cancelled", "canceled")
REFUSED = ("cannot", "can't", "can not", "unable", "not able", "not allowed", "not possible")
OPENINGS = [
    "Hi, I need to cancel one of my reservations.",
    "Hello! Could you cancel a booking for me?",
    "I'd like to cancel a trip, please.",
    "Please cancel one of my flights.",
]


class Desk(sdk.TaskEnv):
    capability = "refund_eligibility"
    target = "tau2-airline"
    description = "Cancel a reservation only when its fare allows it (business cabin or travel insurance)."
    tool_names = ["get_reservation_details", "cancel_reservation"]
    max_steps = 10
    write_tools = frozenset({"cancel_reservation"})

    def generate(self, seed):
        rng = self.rng(seed)
        name = rng.choice(FIRST_NAMES)
        reservations = {}
        for index in range(rng.randint(2, 4)):
            rid = "".join(rng.choice(LETTERS) for _ in range(6))
            origin, destination = rng.sample(CITIES, 2)
            reservations[rid] = {
                "reservation_id": rid,
                "cabin": rng.choice(CABINS),
                "insurance": rng.choice(["yes", "no"]),
                "origin": origin,
                "destination": destination,
                "total": rng.randint(90, 900),
                "status": "active",
            }
        target = rng.choice(sorted(reservations))
        record = reservations[target]
        allowed = record["cabin"] == "business" or record["insurance"] == "yes"
        return sdk.Scenario(
            seed=seed,
            state={"reservations": reservations},
            user={"name": name, "reservation_id": target, "opening": rng.choice(OPENINGS),
                  "facts": [[["which", "reservation", "booking", "trip"], f"It's {target}, {record['origin']} to {record['destination']}."]]},
            truth={"cancel": allowed, "reservation_id": target},
        )

    def system_prompt(self, scenario):
        return ("You are an airline agent. A reservation may be cancelled only if it is in business class or has "
                "travel insurance. Look it up before acting.")

    def first_user_message(self, scenario):
        return scenario.user["opening"]

    @sdk.tool
    def get_reservation_details(self, state, reservation_id):
        if reservation_id not in state["reservations"]:
            raise sdk.ToolError("Reservation not found")
        return state["reservations"][reservation_id]

    @sdk.tool
    def cancel_reservation(self, state, reservation_id):
        if reservation_id not in state["reservations"]:
            raise sdk.ToolError("Reservation not found")
        record = state["reservations"][reservation_id]
        if record["status"] == "cancelled":
            raise sdk.ToolError("Reservation is already cancelled")
        record["status"] = "cancelled"
        return record

    def evaluate(self, episode):
        rid = episode.scenario.user["reservation_id"]
        allowed = episode.scenario.truth["cancel"]
        cancelled = episode.state["reservations"][rid]["status"] == "cancelled"
        others = [r for key, r in episode.state["reservations"].items() if key != rid and r["status"] == "cancelled"]
        looked = episode.first_index("get_reservation_details", reservation_id=rid)
        acted = episode.first_index("cancel_reservation", reservation_id=rid)
        verified = looked is not None and (acted is None or looked < acted)
        told = any(episode.said(w) for w in (CONFIRMED if allowed else REFUSED))
        return sdk.Reward(
            components={"state": float(cancelled == allowed), "told": float(told)},
            gates={"verified": 1.0 if verified else 0.4, "no_other_cancelled": 0.0 if others else 1.0},
        )

    def reference_solution(self, scenario):
        rid = scenario.user["reservation_id"]
        turns = [sdk.say("Which reservation would you like to cancel?"), sdk.call("get_reservation_details", reservation_id=rid)]
        if scenario.truth["cancel"]:
            turns.append(sdk.call("cancel_reservation", reservation_id=rid))
            turns.append(sdk.say(f"Reservation {rid} is cancelled."))
        else:
            turns.append(sdk.say(f"Sorry, reservation {rid} cannot be cancelled: its fare does not allow it."))
        return turns

    def capability_skipping_solution(self, scenario):
        rid = scenario.user["reservation_id"]
        return [sdk.say("Which reservation would you like to cancel?"), sdk.call("cancel_reservation", reservation_id=rid),
                sdk.say(f"Reservation {rid} is cancelled.")]


ENV = Desk
