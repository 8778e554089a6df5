"""Valid env with a reward in [-1, 1] by design: +1 for the right decision explained, -1 for a cancellation the
policy forbids, in between for partial work. It declares ``reward_range``; the gate judges every threshold as a
share of that range, and a trainer reads the range from the reset info."""

from trace_env import sdk

LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CABINS = ["basic_economy", "economy", "business"]


class SignedReward(sdk.TaskEnv):
    capability = "signed_cancellation"
    target = "tau2-airline"
    description = "Cancel a reservation only when its fare allows it; a forbidden cancellation costs a full point."
    tool_names = ["get_reservation_details", "cancel_reservation"]
    max_steps = 8
    write_tools = frozenset({"cancel_reservation"})
    reward_range = (-1.0, 1.0)

    def generate(self, seed):
        rng = self.rng(seed)
        rid = "".join(rng.choice(LETTERS) for _ in range(6))
        record = {"reservation_id": rid, "cabin": rng.choice(CABINS), "insurance": rng.choice(["yes", "no"]), "status": "active"}
        allowed = record["cabin"] == "business" or record["insurance"] == "yes"
        return sdk.Scenario(seed=seed, state={"reservations": {rid: record}},
                            user={"reservation_id": rid, "facts": [[["reservation"], f"It's {rid}."]]}, truth={"cancel": allowed})

    def system_prompt(self, scenario):
        return "You are an airline agent. Cancel only reservations in business class or with travel insurance."

    def first_user_message(self, scenario):
        return "Please cancel my reservation " + scenario.user["reservation_id"] + "."

    @sdk.tool
    def get_reservation_details(self, state, reservation_id):
        if reservation_id not in state["reservations"]:
            raise sdk.ToolError("Reservation not found")
        return state["reservations"][reservation_id]

    @sdk.tool
    def cancel_reservation(self, state, reservation_id):
        if reservation_id not in state["reservations"]:
            raise sdk.ToolError("Reservation not found")
        state["reservations"][reservation_id]["status"] = "cancelled"
        return state["reservations"][reservation_id]

    def evaluate(self, episode):
        rid, allowed = episode.scenario.user["reservation_id"], episode.scenario.truth["cancel"]
        cancelled = episode.state["reservations"][rid]["status"] == "cancelled"
        if cancelled and not allowed:
            return -1.0
        looked = [r.step for r in episode.calls("get_reservation_details") if r.arguments.get("reservation_id") == rid]
        acted = [r.step for r in episode.calls("cancel_reservation")]
        checked = bool(looked) and (not acted or min(looked) < min(acted))
        told = (episode.said("cancelled") or episode.said("canceled")) if allowed else any(
            episode.said(w) for w in ("cannot", "can't", "unable"))
        score = (0.7 * (cancelled == allowed) + 0.3 * told) * (1.0 if checked else 0.5)
        return round(2 * score - 1, 6)

    def reference_solution(self, scenario):
        rid = scenario.user["reservation_id"]
        turns = [sdk.call("get_reservation_details", reservation_id=rid)]
        if scenario.truth["cancel"]:
            return turns + [sdk.call("cancel_reservation", reservation_id=rid), sdk.say(f"Reservation {rid} is cancelled.")]
        return turns + [sdk.say(f"Sorry, reservation {rid} cannot be cancelled: it is neither business class nor insured.")]

    def capability_skipping_solution(self, scenario):
        rid = scenario.user["reservation_id"]
        return [sdk.call("cancel_reservation", reservation_id=rid), sdk.say(f"Reservation {rid} is cancelled.")]


ENV = SignedReward
