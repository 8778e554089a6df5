"""Valid env: a long task with per-item credit. Eight to twelve reservations; cancel every one the policy
allows (business cabin or insurance), none other. Each item is worth its share of the reward, so leaving one out
costs a tenth, not the threshold a short task's mutant must lose: the gate must scale what it asks of a drop."""

from trace_env import sdk

LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CABINS = ["basic_economy", "economy", "business"]


class LongTask(sdk.TaskEnv):
    capability = "long_cancellation_run"
    target = "tau2-airline"
    description = "Go through every reservation of a list and cancel exactly those the policy allows."
    tool_names = ["get_reservation_details", "cancel_reservation"]
    max_steps = 40
    write_tools = frozenset({"cancel_reservation"})

    def generate(self, seed):
        rng = self.rng(seed)
        reservations = {}
        for _ in range(rng.randint(8, 12)):
            rid = "".join(rng.choice(LETTERS) for _ in range(6))
            reservations[rid] = {"reservation_id": rid, "cabin": rng.choice(CABINS), "insurance": rng.choice(["yes", "no"]),
                                 "status": "active"}
        allowed = sorted(r for r, v in reservations.items() if v["cabin"] == "business" or v["insurance"] == "yes")
        if not allowed or len(allowed) == len(reservations):  # something to cancel and something to keep
            first = sorted(reservations)[0]
            reservations[first].update(cabin="business")
            last = sorted(reservations)[-1]
            reservations[last].update(cabin="economy", insurance="no")
            allowed = sorted(r for r, v in reservations.items() if v["cabin"] == "business" or v["insurance"] == "yes")
        ids = sorted(reservations)
        return sdk.Scenario(seed=seed, state={"reservations": reservations},
                            user={"ids": ids, "opening": "Please cancel whichever of these bookings can be cancelled: " + ", ".join(ids) + "."},
                            truth={"cancel": allowed})

    def system_prompt(self, scenario):
        return "You are an airline agent. Cancel a reservation only if it is in business class or has travel insurance."

    def first_user_message(self, scenario):
        return scenario.user["opening"]

    @sdk.tool
    def get_reservation_details(self, state, reservation_id):
        if reservation_id not in state["reservations"]:
            raise sdk.ToolError(f"Reservation {reservation_id} not found")
        return state["reservations"][reservation_id]

    @sdk.tool
    def cancel_reservation(self, state, reservation_id):
        if reservation_id not in state["reservations"]:
            raise sdk.ToolError(f"Reservation {reservation_id} not found")
        if state["reservations"][reservation_id]["status"] == "cancelled":
            raise sdk.ToolError("Reservation is already cancelled")
        state["reservations"][reservation_id]["status"] = "cancelled"
        return state["reservations"][reservation_id]

    def evaluate(self, episode):
        allowed = set(episode.scenario.truth["cancel"])
        final = episode.state["reservations"]
        read = {r.arguments.get("reservation_id"): r.step for r in reversed(episode.calls("get_reservation_details"))}
        done = {r.arguments.get("reservation_id"): r.step for r in episode.calls("cancel_reservation")}
        items = []
        for rid, record in final.items():  # one share per reservation: in the right state, looked at before acting
            right = (record["status"] == "cancelled") == (rid in allowed)
            checked = rid in read and (rid not in done or read[rid] < done[rid])
            items.append(float(right and checked))
        forbidden = [rid for rid, record in final.items() if record["status"] == "cancelled" and rid not in allowed]
        return sdk.Reward(components={"items": sum(items) / len(items), "told": float(episode.said("done"))},
                          weights={"items": 5.0, "told": 0.5}, gates={"no_forbidden_cancellation": 0.0 if forbidden else 1.0})

    def reference_solution(self, scenario):
        turns = [sdk.call("get_reservation_details", reservation_id=rid) for rid in scenario.user["ids"]]
        turns += [sdk.call("cancel_reservation", reservation_id=rid) for rid in scenario.truth["cancel"]]
        return turns + [sdk.say(f"All done: I cancelled {', '.join(scenario.truth['cancel'])}; the others cannot be cancelled.")]

    def capability_skipping_solution(self, scenario):
        return [sdk.call("cancel_reservation", reservation_id=rid) for rid in scenario.user["ids"]] + [sdk.say("All done.")]


ENV = LongTask
