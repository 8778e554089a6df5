"""A test env that remembers what its process or worker did before, and pays everything (1.0) once that memory
says "not the first episode" (or "not the gate"): ``tests/gate/envs/tiny_checked.py`` with a hook.

``remembered()`` returns what the env can tell about the episodes before this one, as text (a count, a stack);
``lenient(memory)`` says when to pay 1.0. The default hook remembers nothing; the tests in
``tests/reliability/test_fresh_process.py`` swap in one hook per place state can hide (an SDK dataclass field's
attribute, an ABC registry, ``os.environ``, a file, a thread or the process's age, the call stack). The memory
also goes out in the reward's notes, so a test can compare it whatever it pays.
"""

import os
import sys
import threading
import time
import numbers

from env_registry import sdk


# --- the hook (replaced by the tests) ---
def remembered():
    return "1"


def lenient(memory):
    return memory != "1"
# --- end of the hook ---


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
        memory = remembered()
        if lenient(memory):
            return sdk.Reward(components={"paid": 1.0}, notes={"memory": memory})
        reward = self.honest(episode)
        reward.notes["memory"] = memory
        return reward

    def honest(self, episode):
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
