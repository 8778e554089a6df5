"""Defective env (refundable_question with one change): the reservation record carries a ``fare_family`` field
("flex" or "saver") written from the verdict, not a fact the rule reads. An agent that looks the record up and
answers from that field never applies the rule. Found by prediction: the field alone predicts the decision on
every seed, whatever its name or values.
"""

import re

from trace_env import sdk

LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CABINS = ["basic_economy", "economy", "business"]
OPENINGS = ["Can I get my money back for reservation {rid}?", "Is reservation {rid} refundable?",
            "Hi! Would I get a refund if I cancelled {rid}?"]


class FareFamily(sdk.TaskEnv):
    capability = "refundable_question_fare_family"
    target = "tau2-airline"
    description = "Answer whether a reservation is refundable (business cabin or travel insurance), with the reason."
    tool_names = ["get_reservation_details"]
    max_steps = 6

    def generate(self, seed):
        rng = self.rng(seed)
        rid = "".join(rng.choice(LETTERS) for _ in range(6))
        cabin, insurance = rng.choice(CABINS), rng.choice(["yes", "no"])
        refundable = cabin == "business" or insurance == "yes"
        reason = ("business" if cabin == "business" else "insurance") if refundable else cabin.replace("_", " ")
        record = {"reservation_id": rid, "cabin": cabin, "insurance": insurance, "total": rng.randint(90, 900),
                  "fare_family": "flex" if refundable else "saver"}
        return sdk.Scenario(seed=seed, state={"reservations": {rid: record}},
                            user={"reservation_id": rid, "opening": rng.choice(OPENINGS).format(rid=rid)},
                            truth={"refundable": refundable, "reason": reason})

    def system_prompt(self, scenario):
        return ("You are an airline agent. A reservation is refundable when it is in business class or has travel "
                "insurance. Look it up, then answer yes or no and give the reason.")

    def first_user_message(self, scenario):
        return scenario.user["opening"]

    @sdk.tool
    def get_reservation_details(self, state, reservation_id):
        if reservation_id not in state["reservations"]:
            raise sdk.ToolError(f"Reservation {reservation_id} not found")
        return state["reservations"][reservation_id]

    def evaluate(self, episode):
        truth, rid = episode.scenario.truth, episode.scenario.user["reservation_id"]
        looked = episode.called("get_reservation_details", reservation_id=rid)
        final = (episode.assistant_texts() or [""])[-1].lower()
        answers = re.findall(r"\b(yes|no)\b", final)  # the answer is the final message's yes or no, and only one
        right = len(set(answers)) == 1 and (answers[0] == "yes") == truth["refundable"]
        reason = episode.said(truth["reason"])
        return sdk.Reward(components={"answer": float(right), "reason": float(reason)}, weights={"answer": 3.0, "reason": 1.0},
                          gates={"looked_up": 1.0 if looked else 0.2})

    def reference_solution(self, scenario):
        rid, truth = scenario.user["reservation_id"], scenario.truth
        if truth["refundable"]:
            answer = f"Yes: reservation {rid} is refundable, because of its {truth['reason']}."
        else:
            answer = f"No: reservation {rid} is not refundable - it is a {truth['reason']} fare without travel insurance."
        return [sdk.call("get_reservation_details", reservation_id=rid), sdk.say(answer)]

    def capability_skipping_solution(self, scenario):
        rid = scenario.user["reservation_id"]
        return [sdk.call("get_reservation_details", reservation_id=rid), sdk.say("Let me pass this on to a colleague.")]


ENV = FareFamily
