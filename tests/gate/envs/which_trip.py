"""Valid env whose decision lives in an argument: which of the customer's reservations to cancel.

The customer names a destination; several reservations look alike (same cabin, same route shape), and only the
destination tells them apart. Every seed the reference does the same calls (read the profile, read each
reservation, cancel one): what varies is which one, so the gate must count decisions, not tool names.
"""

from trace_env import sdk

LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CITIES = ["Boston", "Denver", "Austin", "Seattle", "Chicago", "Phoenix", "Atlanta", "Miami", "Dallas", "Portland"]
NAMES = ["mia", "noah", "sofia", "ethan", "amelia", "liam", "chen", "aarav", "fatima", "mateo"]


class WhichTrip(sdk.TaskEnv):
    capability = "which_trip"
    target = "tau2-airline"
    description = "Cancel exactly the reservation the customer describes, found by reading every reservation."
    tool_names = ["get_user_details", "get_reservation_details", "cancel_reservation"]
    max_steps = 12
    write_tools = frozenset({"cancel_reservation"})

    def generate(self, seed):
        rng = self.rng(seed)
        uid = f"{rng.choice(NAMES)}_{rng.randint(1000, 9999)}"
        home = rng.choice(CITIES)
        destinations = rng.sample([c for c in CITIES if c != home], rng.randint(3, 4))
        reservations = {}
        for city in destinations:
            rid = "".join(rng.choice(LETTERS) for _ in range(6))
            reservations[rid] = {"reservation_id": rid, "user_id": uid, "origin": home, "destination": city,
                                 "cabin": "economy", "status": "active"}
        target = rng.choice(sorted(reservations))
        city = reservations[target]["destination"]
        return sdk.Scenario(
            seed=seed, state={"users": {uid: {"user_id": uid, "reservations": sorted(reservations)}}, "reservations": reservations},
            user={"user_id": uid, "city": city, "opening": f"Hi, I'm {uid}. Please cancel my trip to {city}."},
            truth={"reservation_id": target})

    def system_prompt(self, scenario):
        return "You are an airline agent. Find the reservation the customer means and cancel exactly that one."

    def first_user_message(self, scenario):
        return scenario.user["opening"]

    @sdk.tool
    def get_user_details(self, state, user_id):
        if user_id not in state["users"]:
            raise sdk.ToolError(f"User {user_id} not found")
        return state["users"][user_id]

    @sdk.tool
    def get_reservation_details(self, state, reservation_id):
        if reservation_id not in state["reservations"]:
            raise sdk.ToolError(f"Reservation {reservation_id} not found")
        return state["reservations"][reservation_id]

    @sdk.tool
    def cancel_reservation(self, state, reservation_id):
        if reservation_id not in state["reservations"]:
            raise sdk.ToolError(f"Reservation {reservation_id} not found")
        record = state["reservations"][reservation_id]
        if record["status"] == "cancelled":
            raise sdk.ToolError("Reservation is already cancelled")
        record["status"] = "cancelled"
        return record

    def evaluate(self, episode):
        target = episode.scenario.truth["reservation_id"]
        final = episode.state["reservations"]
        right = final[target]["status"] == "cancelled"
        wrong = [rid for rid, r in final.items() if rid != target and r["status"] == "cancelled"]
        cancelled_at = [r.step for r in episode.calls("cancel_reservation") if r.arguments.get("reservation_id") == target]
        read = [r.step for r in episode.calls("get_reservation_details") if r.arguments.get("reservation_id") == target]
        checked = bool(read) and (not cancelled_at or min(read) < min(cancelled_at))
        told = episode.said("cancelled") or episode.said("canceled")
        return sdk.Reward(components={"right_trip": float(right), "told": float(told)}, weights={"right_trip": 3.0, "told": 0.5},
                          gates={"no_other_cancelled": 0.0 if wrong else 1.0, "read_before_cancelling": 1.0 if checked else 0.4})

    def reference_solution(self, scenario):
        uid, target = scenario.user["user_id"], scenario.truth["reservation_id"]
        turns = [sdk.call("get_user_details", user_id=uid)]
        turns += [sdk.call("get_reservation_details", reservation_id=rid) for rid in scenario.state["users"][uid]["reservations"]]
        return turns + [sdk.call("cancel_reservation", reservation_id=target),
                        sdk.say(f"Your trip to {scenario.user['city']} ({target}) is cancelled.")]

    def capability_skipping_solution(self, scenario):
        uid = scenario.user["user_id"]
        first = scenario.state["users"][uid]["reservations"][0]
        return [sdk.call("get_user_details", user_id=uid), sdk.call("cancel_reservation", reservation_id=first),
                sdk.say("Your trip is cancelled.")]


ENV = WhichTrip
