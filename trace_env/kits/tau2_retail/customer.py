"""A deterministic τ² retail customer: answers what the agent asks from the scenario, confirms, and leaves.

An env puts the customer's lines in ``scenario.user`` under these keys (missing or empty ones are never
said): ``identity_reply`` (email, or name and zip), ``order_reply``, ``payment_reply``, ``items_reply`` ("yes,
only those items"), ``reason_reply`` (why cancel), ``confirm_reply``, ``restate`` (the request again) and
``closing``. Then ``user_reply`` is one line: ``return tau2_retail.customer_reply(episode, agent_text)``, and
``system_prompt`` another: ``return tau2_retail.system_prompt(notes)``.
"""

from __future__ import annotations

import re

from trace_env import sdk, targets

__all__ = ["ASKS", "MAX_USER_TURNS", "customer_reply", "system_prompt"]

#: What an agent message asks for, by the key of the answer.
ASKS = {
    "identity_reply": re.compile(r"\b(e-?mail address|your e-?mail|zip ?code|your (?:full )?name|postal code|"
                                 r"verify your identity|authenticat)", re.I),
    "order_reply": re.compile(r"\b(which order|what order|which of your orders|(?:the|your) order (?:id|number)s?)"
                              r"\b(?!\s*#)", re.I),
    "payment_reply": re.compile(r"\b((?:which|what) (?:payment|card|method)|how would you like to (?:pay|be refunded|"
                                r"receive)|payment method (?:would|do|should|to use|for the)|charge or refund)", re.I),
    "items_reply": re.compile(r"\b(all (?:the )?items|every item|only item|any other items?|other items? (?:to|you)|"
                              r"anything else (?:to|you(?:'d| would) like to) (?:exchange|change|modify))", re.I),
    "reason_reply": re.compile(r"\b((?:what is|what's|tell me|share|provide|give me) (?:the |your )?reason|"
                               r"why (?:do|would|are) you)", re.I),
}
CONFIRM = re.compile(r"\b(confirm|proceed|go ahead|shall i|should i|would you like me to|do you want me to|"
                     r"is that (?:ok|okay|correct|right)|yes or no|sound good)\b", re.I)
ANYTHING_ELSE = re.compile(r"\b(anything else|something else|any other questions?)\b", re.I)
MAX_USER_TURNS = 10


def customer_reply(episode: sdk.Episode, agent_text: str, max_turns: int = MAX_USER_TURNS) -> sdk.UserReply:
    """Several questions in one message get several answers in one reply (each answer at most twice; the
    identity only until a ``find_user_id_*`` call succeeded). A confirmation question gets ``confirm_reply``.
    A question it cannot map gets ``restate`` (twice at most); a message without a question ends the chat."""
    user = episode.scenario.user
    if episode.user_turns >= max_turns:
        return sdk.UserReply(user["closing"], done=True)
    text = (agent_text or "").strip()
    if not text:
        return sdk.UserReply("Sorry, I didn't get any answer. Can you help me with my request?")
    earlier = " ".join(m.get("content") or "" for m in episode.messages if m.get("role") == "user")
    authenticated = any(r.name.startswith("find_user_id") for r in episode.calls(ok=True))
    parts = []
    for key, pattern in ASKS.items():
        if key == "identity_reply" and authenticated:
            continue
        if pattern.search(text) and user.get(key) and earlier.count(user[key]) < 2:
            parts.append(user[key])
    if CONFIRM.search(text):
        parts.append(user["confirm_reply"])
    if parts:
        return sdk.UserReply(" ".join(parts))
    if "?" in text and not ANYTHING_ELSE.search(text) and earlier.count(user["restate"]) < 2:
        return sdk.UserReply(user["restate"])
    return sdk.UserReply(user["closing"], done=True)


def system_prompt(notes: str = "") -> str:
    """A retail agent's system prompt: who it is, the store policy (the target's summary of τ²'s), the env's notes."""
    return ("You are a customer-service agent for an online retail store. You help customers through the tools you are "
            f"given and follow the store policy below.\n\n{targets.policy('tau2-retail')}\n{notes}").rstrip() + "\n"
