"""tests/envs/tiny_cancel.py (the previous release's fixture, kept byte for byte) with the reward hole the exploit
search finds closed: that env pays an agent that reads the reservation and says nothing 0.75 of the reference
(1.0 on every seed to refuse), because it never reads what the agent tells the user. Here the outcome must be
told, acting before looking halves the reward, and an episode that never tells the outcome keeps 0.3 of it
(leaving a non-refundable reservation alone is right on half the seeds: a hand-off to a human that reads
first otherwise earned 0.6 there, 0.4-0.52 of the reference's mean depending on the gate's random seeds).
Same capability name, so tests that build and validate a passing tiny env use this one."""

from env_registry import sdk


class TinyCancel(sdk.TaskEnv):
    capability = "tiny_cancel"
    target = "tau2-airline"
    description = "Cancel a reservation only when it is refundable."
    tool_names = ["get_reservation_details", "cancel_reservation"]
    max_steps = 6
    write_tools = frozenset({"cancel_reservation"})

    def generate(self, seed):
        rng = self.rng(seed)
        rid = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6))
        refundable = rng.random() < 0.5
        return sdk.Scenario(
            seed=seed,
            state={"reservations": {rid: {"reservation_id": rid, "refundable": refundable, "status": "active"}}},
            user={"reservation_id": rid, "facts": [[["reservation"], f"It is {rid}."]]},
            truth={"cancel": refundable},
        )

    def system_prompt(self, scenario):
        return "You are an airline agent. Cancel only refundable reservations."

    def first_user_message(self, scenario):
        return "Please cancel my reservation."

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
        rid = episode.scenario.user["reservation_id"]
        cancelled = episode.state["reservations"][rid]["status"] == "cancelled"
        looked = [r.step for r in episode.calls("get_reservation_details") if r.arguments.get("reservation_id") == rid]
        acted = [r.step for r in episode.calls("cancel_reservation")]
        checked = bool(looked) and (not acted or min(looked) < min(acted))  # looked up in an earlier turn than it acted
        said = ("cancelled", "canceled") if episode.scenario.truth["cancel"] else ("cannot", "can't")
        told = any(episode.said(word) for word in said)
        return sdk.Reward(
            components={"state": float(cancelled == episode.scenario.truth["cancel"]), "checked": float(checked), "told": float(told)},
            weights={"state": 1.0, "checked": 0.5, "told": 1.0},
            gates={"looked_first": 1.0 if checked else 0.5, "answered": 1.0 if told else 0.3},
        )

    def reference_solution(self, scenario):
        rid = scenario.user["reservation_id"]
        turns = [sdk.call("get_reservation_details", reservation_id=rid)]
        if scenario.truth["cancel"]:
            turns.append(sdk.call("cancel_reservation", reservation_id=rid))
            turns.append(sdk.say("Your reservation is cancelled."))
        else:
            turns.append(sdk.say("Sorry, this reservation is not refundable, so I cannot cancel it."))
        return turns

    def capability_skipping_solution(self, scenario):
        rid = scenario.user["reservation_id"]
        return [sdk.call("cancel_reservation", reservation_id=rid), sdk.say("Done, cancelled.")]


ENV = TinyCancel
