"""Transfers to a human agent against the policy (escalation_judgment), on τ² airline and retail.

The policy transfers "if and only if the request cannot be handled within the scope of your actions". Two
cases are decided on the records the agent had read:

- a transfer of a request the agent could handle itself: a cancellation with a valid ground (airline), or a
  cancellation, return or exchange the order's status allows (retail), not made before the transfer; not
  judged when the user asked for a person (then the request may carry a condition the agent cannot meet);
- (airline) a flight change the agent had searched and laid out, on a reservation whose change the policy allows,
  transferred before any change was made and without the user asking for a person;
- (airline) a cancellation of a trip part of which had flown, which the policy sends to a human agent, not
  transferred.
"""

from __future__ import annotations

import re
from typing import Any

from trace_env.kits import tau2_airline as airline_kit
from trace_env.kits import tau2_retail as retail_kit

from factory.analyze.conversation import ORDER_ID, confirms_first, ids_in, reason_category
from factory.analyze.evidence import LACKING, PRESENT, TEXT, Evidence, same_record
from factory.analyze.world import World

CAP = "escalation_judgment"
TRANSFER = "transfer_to_human_agents"
_ASKED_PERSON = re.compile(r"\b(human|representative|supervisor|manager|real person|someone (else|who can)|transfer)\b", re.I)
_PROPOSES = re.compile(r"\b(confirm|proceed|shall i|would you like me to|do you want me to|go ahead)\b", re.I)
_ACTIONS = {"cancel": re.compile(r"\bcancel", re.I), "return": re.compile(r"\breturn", re.I), "exchange": re.compile(r"\bexchang", re.I)}


def _target(ids: list[str], records: dict[str, Any], context: str) -> str | None:
    named = [i for i in ids if i in records]
    if len(named) == 1:
        return named[0]
    in_context = [i for i in sorted(ids_in(context), key=context.find) if i in records]
    if len(set(in_context)) == 1:
        return in_context[0]
    return next(iter(records)) if len(records) == 1 else None


def _airline(ev: Evidence, at: int, asked: str, world: World, context: str) -> dict[str, Any] | None:
    if not _ACTIONS["cancel"].search(asked):
        return None
    rid = _target(sorted(ids_in(asked)), world.reservations, context)
    if rid is None or any(c.name == "cancel_reservation" and same_record((c.arguments or {}).get("reservation_id"), rid) for c in ev.calls if c.message_index < at):
        return None
    reason = reason_category(ev.user_text_before(at))
    check = airline_kit.cancellation_check(world.reservations[rid], world.flights, world.now, reason)
    return {"action": "cancel", "record": rid, "grounds": check.grounds, "reason": reason} if check.eligible else None


def _retail(ev: Evidence, at: int, asked: str, world: World, context: str) -> dict[str, Any] | None:
    action = next((a for a, p in _ACTIONS.items() if p.search(asked)), None)
    if action is None:
        return None
    oid = _target(["#" + m.lstrip("#") for m in ORDER_ID.findall(asked)], world.orders, context)
    attempted = [c for c in ev.calls if c.message_index < at and ev.catalog.is_write(c.name)]
    if oid is None or any(same_record((c.arguments or {}).get("order_id"), oid) for c in attempted):
        return None
    status = world.orders[oid].get("status")
    return {"action": action, "record": oid, "status": status} if action in retail_kit.allowed_actions(world.orders[oid]) else None


def judge_transfers(ev: Evidence) -> None:
    """A transfer of a request the records show the agent could handle."""
    for call in ev.calls:
        if call.name != TRANSFER:
            continue
        users = [u for u in ev.said if u.role == "user" and u.index < call.message_index]
        if not users or any(_ASKED_PERSON.search(u.text) for u in users):
            return
        asked = "\n".join(u.text for u in users[-2:])
        context = "\n".join(u.text for u in ev.said if u.role == "assistant" and u.index < call.message_index)
        world = ev.world_before(call.message_index)
        handle = (_airline if ev.domain == "airline" else _retail)(ev, call.message_index, asked, world, context[-1500:])
        if handle is not None:
            ev.add(CAP, LACKING, f"transferred to a human agent a {handle['action']} of {handle['record']} that the policy let the agent make "
                                 f"itself ({', '.join(handle.get('grounds') or [str(handle.get('status'))])})", rule="transfer_of_allowed_request",
                   at=call.message_index, values={**handle, "asked": users[-1].text[:160]}, confidence=TEXT)  # fmt: skip
        elif not _transfer_instead_of_confirmed_write(ev, call.message_index, users) and ev.domain == "airline":
            _transfer_of_found_change(ev, call.message_index, users)
        return


def _transfer_instead_of_confirmed_write(ev: Evidence, at: int, users: list) -> bool:
    """The user said yes to a change the agent had laid out and had not asked for a person; the agent made no
    change after that yes and transferred: a request it could handle, escalated."""
    for user in reversed(users[-3:]):
        proposal = next((u for u in reversed(ev.said) if u.role == "assistant" and u.index < user.index), None)
        if proposal is None or not confirms_first(user.text) or not _PROPOSES.search(proposal.text):
            continue
        if any(ev.catalog.is_write(c.name) and c.name != TRANSFER and user.index < c.message_index < at for c in ev.calls):
            return True
        ev.add(CAP, LACKING, f"the user confirmed the change the agent proposed ({user.text.strip()[:60]!r}) and the agent transferred instead "
                             "of making it", rule="transfer_instead_of_confirmed_change", at=at,
               values={"confirmed": user.text[:160], "proposal": proposal.text[:160]}, confidence=TEXT)  # fmt: skip
        return True
    return False


_FLIGHT_NO = re.compile(r"\bHAT\d{3}\b")
_CHANGE = re.compile(r"\b(change|move|switch|modify|push|rebook|nonstop|earlier|later)\b[^.]{0,40}\b(flights?|dates?|return|outbound|outgoing|trip|reservation)\b", re.I)


def _transfer_of_found_change(ev: Evidence, at: int, users: list) -> None:
    """(airline) The user asked to change a reservation's flights, the agent searched and laid out flights for it
    (its cabin is not basic economy and nothing has flown, so the policy allows the change), then transferred
    without making any change and without the user asking for a person: over a fee or insurance dispute, say,
    which the agent answers from the policy instead."""
    if not any(_CHANGE.search(u.text) for u in users):
        return
    searches = [c for c in ev.calls if c.name.startswith("search_") and c.message_index < at and c.result]
    found = {f for c in searches for f in _FLIGHT_NO.findall(c.result or "")}
    laid_out = [u for u in ev.said if u.role == "assistant" and u.index < at and set(_FLIGHT_NO.findall(u.text)) & found]
    if not laid_out or any(ev.catalog.is_write(c.name) and c.name != TRANSFER and c.message_index < at for c in ev.calls):
        return
    world = ev.world_before(at)
    context = "\n".join(u.text for u in users) + "\n" + laid_out[-1].text
    rid = _target(sorted(ids_in(context)), world.reservations, context)
    res = world.reservations.get(rid) if rid else None
    if res is None or res.get("cabin") == "basic_economy" or airline_kit.flown_segments(res, world.flights):
        return
    ev.add(CAP, LACKING, f"laid out new flights for {rid}, whose change the policy allows, then transferred without making it or being asked "
                         "for a person", rule="transfer_of_found_change", at=at,
           values={"reservation": rid, "cabin": res.get("cabin"), "laid_out": laid_out[-1].text[:160]}, confidence=TEXT)  # fmt: skip


def judge_flown_cancellations(ev: Evidence) -> None:
    """The airline policy sends a cancellation of a partly flown trip to a human agent."""
    judged: set[str] = set()
    for utterance in ev.said:
        if utterance.role != "user" or not re.search(r"\bcancel", utterance.text, re.I):
            continue
        for rid in sorted(ids_in(utterance.text) - judged):
            res = ev.final_world.reservations.get(rid)
            if res is None or not airline_kit.flown_segments(res, ev.final_world.flights):
                continue
            judged.add(rid)
            flown = [f"{s['flight_number']} {s['date']}" for s in airline_kit.flown_segments(res, ev.final_world.flights)]
            if any(c.name == TRANSFER and c.message_index > utterance.index for c in ev.calls):
                ev.add(CAP, PRESENT, f"transferred the cancellation of {rid}, part of which had flown", rule="flown_cancellation_transferred")
            else:
                ev.add(CAP, LACKING, f"did not transfer the cancellation of {rid}, part of which had flown, as the policy requires",
                       rule="flown_cancellation_not_transferred", at=utterance.index, values={"reservation": rid, "flown": flown}, confidence=TEXT)  # fmt: skip


def judge(ev: Evidence) -> None:
    if ev.domain not in ("airline", "retail"):
        return
    judge_transfers(ev)
    if ev.domain == "airline":
        judge_flown_cancellations(ev)
