"""How airline customers and agents talk: reasons for cancelling, what a question asks for, how a rule is named.

A scripted customer answers a fact when the agent's (normalised) message contains one of its ``TRIGGERS``
(see :func:`trace_env.kits.text.answers_to`); users give a reason for cancelling in one of the
``REASON_TEXTS`` categories; a refusal explains the deciding policy rule when it hits every group of that
rule's ``RULE_WORDS`` (:func:`trace_env.kits.text.hits_groups`), so rewards can grade explanations.
"""

from __future__ import annotations

from trace_env import targets
from trace_env.kits.tau2_airline.policy import segment_status
from trace_env.kits.tau2_airline.world import CABIN_LABEL, TAU2_NOW
from trace_env.kits.text import money

__all__ = ["REASON_LABEL", "REASON_TEXTS", "RULE_WORDS", "TRIGGERS", "agent_policy", "system_prompt", "explain_cancellation",
           "explain_refusal"]

#: Why a user cancels, by category; travel insurance covers only "health" and "weather".
REASON_TEXTS = {
    "personal": ["my plans changed and I no longer need to make this trip",
                 "the conference I was going to has been moved online",
                 "I found a schedule that works better for my family", "my work trip was called off",
                 "the friends I was visiting can no longer host me"],
    "health": ["I came down with a bad flu and my doctor told me not to travel", "I injured my knee and can't fly right now",
               "I need to have a small surgery that week", "I'm ill and not fit to travel"],
    "weather": ["a major storm is forecast at my destination that week",
                "there's a hurricane warning for the area I'm flying to",
                "heavy snow has closed the roads around my destination"],
    "airline_cancelled": ["the airline cancelled my flight", "I got a notice that my flight was cancelled",
                          "I heard the flight was cancelled by you guys"],
}
REASON_LABEL = {"personal": "a change of plans", "health": "a health reason", "weather": "bad weather",
                "airline_cancelled": "the airline cancelling the flight"}
#: What an agent's question asks for: the user id, the reason for cancelling, a reservation code.
TRIGGERS = {
    "user_id": ["user id", "user-id", "userid", "account id", "username", "user name"],
    "reason": ["reason", "why do", "why are", "why would", "may i ask why", "can i ask why"],
    "reservation": ["reservation id", "reservation number", "reservation code", "booking reference",
                    "confirmation number", "booking code", "booking number", "booking id"],
}
#: Phrases that name each deciding rule in a refusal: groups of alternatives, every group must be hit.
RULE_WORDS = {
    "already_flown": [["flown", "already departed", "has departed", "already taken off", "has taken off", "already flew",
                       "already been used", "already travelled", "already traveled", "already landed", "has landed",
                       "in the past", "already operated", "in the air", "in progress", "already left",
                       "already took place"]],
    "insurance_not_covered": [["insurance"], ["health", "medical", "weather", "not covered", "isn't covered",
                                              "is not covered", "doesn't cover", "does not cover", "not a covered"]],
    "airline_claim_unverified": [["not been cancelled", "not cancelled", "hasn't been cancelled", "wasn't cancelled",
                                  "was not cancelled", "isn't cancelled", "is not cancelled", "still scheduled",
                                  "still operating", "scheduled to operate", "on schedule", "on time", "delayed",
                                  "still available", "no cancellation"]],
    "no_rule": [["24 hours", "24-hour", "24 hour", "twenty-four hours", "twenty four hours", "within a day"],
                ["insurance", "business"]],
    "basic_economy": [["basic economy", "basic-economy", "basic_economy"]],
}


def agent_policy(now=TAU2_NOW) -> str:
    """The airline policy for the agent's system prompt (the target's summary of τ²'s ``policy.md``), with τ²'s
    frozen present moment replaced by the scenario's ``now``."""
    return targets.policy("tau2-airline").replace("2024-05-15 15:00:00", now.strftime("%Y-%m-%d %H:%M:%S"))


def system_prompt(now=TAU2_NOW, notes: str = "") -> str:
    """An airline agent's system prompt: who it is, :func:`agent_policy` at ``now``, then the env's ``notes``."""
    return (f"You are a customer service agent for HAT Airlines. You help customers with their reservations using the "
            f"tools provided.\n\n{agent_policy(now)}\n{notes}").rstrip() + "\n"


def explain_refusal(rule: str, reservation: dict, flights: dict, reason: str = "personal", flight_number: str = "") -> str:
    """What an agent says to refuse a request on ``reservation`` because of ``rule`` (a
    :class:`~trace_env.kits.tau2_airline.policy.CancellationCheck` rule, or ``basic_economy`` for a flight change of
    ``flight_number``). The sentence hits every group of ``RULE_WORDS[rule]``."""
    rid = reservation["reservation_id"]
    cabin, booked = CABIN_LABEL[reservation["cabin"]], reservation["created_at"].replace("T", " ")
    if rule == "basic_economy":
        return (f"Reservation {rid} is a basic economy booking, and flights on basic economy reservations cannot be "
                f"changed, so I can't move flight {flight_number}.")
    if rule == "already_flown":
        leg = reservation["flights"][0]
        return (f"Reservation {rid} cannot be cancelled: its first flight, {leg['flight_number']} on {leg['date']}, has "
                f"already been flown, and once part of a trip has been flown I am not able to cancel it. A human agent "
                f"can look at it if you wish.")
    if rule == "insurance_not_covered":
        return (f"Reservation {rid} is not eligible for cancellation: it was booked on {booked}, more than 24 hours ago, "
                f"in {cabin}, and although it has travel insurance, the insurance only covers cancelling for health or "
                f"weather reasons, and {REASON_LABEL[reason]} is not covered.")
    if rule == "airline_claim_unverified":
        listed = ", ".join(f"{f['flight_number']} on {f['date']} is '{segment_status(f, flights)}'"
                           for f in reservation["flights"])
        return (f"I checked the flights of reservation {rid} and none has been cancelled by the airline ({listed}), so it "
                f"has not been cancelled. It was booked more than 24 hours ago ({booked}), in {cabin}, so I cannot "
                f"cancel it.")
    insurance = "no travel insurance" if reservation["insurance"] == "no" else "insurance that does not cover this reason"
    return (f"Reservation {rid} is not eligible for cancellation: it was booked on {booked}, more than 24 hours ago; it "
            f"is in {cabin} rather than business; it has {insurance}; and the airline has not cancelled any of its "
            f"flights. So I cannot cancel it.")


def explain_cancellation(rule: str, reservation: dict, reason: str = "personal", cancelled_leg: dict | None = None) -> str:
    """What an agent says before cancelling under an allowing ``rule``: why it may, and the refund it makes."""
    why = {"recent_booking": f"it was booked less than 24 hours ago ({reservation['created_at'].replace('T', ' ')})",
           "airline_cancelled": (f"the airline cancelled flight {cancelled_leg['flight_number']} on "
                                 f"{cancelled_leg['date']}") if cancelled_leg else "the airline cancelled a flight",
           "business_cabin": "it is a business-class booking",
           "insurance_covered": f"it has travel insurance and {REASON_LABEL[reason]} is a covered reason"}[rule]
    methods = ", ".join(sorted(dict.fromkeys(p["payment_id"] for p in reservation["payment_history"])))
    refund = sum(p["amount"] for p in reservation["payment_history"] if p["amount"] > 0)
    return (f"Reservation {reservation['reservation_id']} can be cancelled because {why}. The full {money(refund)} will "
            f"be refunded to the original payment method ({methods}) within 5 to 7 business days.")
