"""τ² airline: the agent's decisions judged against the policy, on the records it had read.

Each state-changing call is judged three ways: did the agent read what the policy makes the action
conditional on (precondition_verification), does the policy allow the action on those records
(policy_application; the 24-hour window and flown segments are datetime_reasoning), and are the counts and
fees right (structured_data_reasoning). Each refusal is judged the same way: refusing what the policy
allows is a policy-application failure. The policy itself comes from ``trace_env.kits.tau2_airline``.
Every finding carries the call's message index and the record values it rests on. Refusals are judged in
``refusals_airline``.
"""

from __future__ import annotations

import re
from typing import Any

from trace_env.kits import tau2_airline as kit

from factory.analyze import refusals_airline
from factory.analyze.refusals_airline import res_values, segments
from factory.analyze.calls import AgentCall
from factory.analyze.conversation import BEYOND_24H, WITHIN_24H, reason_category
from factory.analyze.evidence import LACKING, PRESENT, RECORD, TEXT, Evidence
from factory.analyze.world import World, hours_between

PRE, POLICY, DATA, DATE = "precondition_verification", "policy_application", "structured_data_reasoning", "datetime_reasoning"
_COMPLAINT_DELAY = re.compile(r"\bdelay", re.IGNORECASE)
_COMPLAINT_CANCEL = re.compile(r"\b(flight|airline)\b[^.]{0,40}\bcancel+ed\b|\bcancel+ed (flight|by)\b", re.IGNORECASE)
_ASKED_COMPENSATION = re.compile(r"\b(compensat\w*|certificate|voucher|refund|credit|reimburs\w*|make (it|this|up)|gesture)\b", re.IGNORECASE)
_REBOOK = re.compile(r"\bcancel\w*\b[^.]{0,60}\b(book|rebook|reserve)\w*\b[^.]{0,20}\b(new|another|different)\b|\b(cancel\w* and rebook|cancel\w* and book)\b", re.IGNORECASE)
"""A user asking to cancel a trip in order to book its replacement: the change of plan is the reason."""
_REASON_WORD = re.compile(r"\b(reason|raison|motivo|raz[oó]n|grund)", re.IGNORECASE)
"""The agent asked why (in the languages real runs switch to)."""
_ASKED_REASON = re.compile(r"\breason\b|\bwhy\b", re.IGNORECASE)


def _read_reservation(ev: Evidence, call: AgentCall, world: World) -> dict[str, Any] | None:
    rid = (call.arguments or {}).get("reservation_id")
    res = world.reservations.get(rid) if isinstance(rid, str) else None
    if res is None:
        ev.add(PRE, LACKING, f"{call.name}({rid!r}) made without reading that reservation first", rule="write_without_reading_record",
               at=call.message_index, values={"tool": call.name, "reservation": rid, "read": sorted(world.reservations)}, confidence=RECORD)  # fmt: skip
    return res


def _stated_reason(ev: Evidence, before: int) -> tuple[str | None, str | None]:
    """(the policy's category, the user's words) for the reason the user gave: a recognised category in what the
    user said, else "other" when the user answered the agent's question about the reason with anything else,
    else (no reason said at all) a category in the task's instructions, the user's situation."""
    category = reason_category(ev.user_text_before(before))
    if category is not None:
        return category, None
    for number, utterance in enumerate(ev.said):
        if utterance.index >= before or utterance.role != "assistant" or not _ASKED_REASON.search(utterance.text):
            continue
        answer = next((u for u in ev.said[number + 1 :] if u.role == "user" and u.index < before), None)
        if answer is not None:
            return "other", answer.text.strip()[:120]
    return reason_category(ev.instructions), None  # never said: the task's instructions tell the user's situation


def _cancel(ev: Evidence, call: AgentCall, world: World) -> None:
    res = _read_reservation(ev, call, world)
    if res is None:
        return
    rid = res["reservation_id"]
    reason, words = _stated_reason(ev, call.message_index)
    facts = {**res_values(res, world.now), "reason": reason}
    if reason is None and not _REBOOK.search(ev.user_text_before(call.message_index)) and not _REASON_WORD.search(ev.agent_text_before(call.message_index, last=50)):
        ev.add(PRE, LACKING, f"cancelled {rid} without obtaining the reason for cancellation, which the policy requires",
               rule="cancel_without_reason", at=call.message_index, values=facts, confidence=TEXT)  # fmt: skip
    else:
        ev.add(PRE, PRESENT, f"read {rid} and the reason before cancelling")
    check = kit.cancellation_check(res, world.flights, world.now, reason)
    if check.flown:
        flown = ", ".join(f"{s['flight_number']} {s['date']}" for s in check.flown)
        ev.add(POLICY, LACKING, f"cancelled {rid} although {flown} had already flown (the policy sends this to a human agent)",
               rule="cancel_flown_trip", at=call.message_index, values={**facts, "flown": flown})  # fmt: skip
        return
    if check.eligible:
        ev.add(POLICY, PRESENT, f"cancelled {rid}, allowed ({check.rule})")
        return
    unknown = [s for s in res["flights"] if kit.segment_status(s, world.flights) is None]
    if reason == "airline_cancelled" and unknown:
        ev.add(PRE, LACKING, f"cancelled {rid} on the user's word that the airline cancelled, without checking its flights' status",
               rule="airline_cancellation_unchecked", at=call.message_index, values={**facts, "unchecked": [s["flight_number"] for s in unknown]})  # fmt: skip
        return
    if res.get("insurance") == "yes" and reason is None:
        return  # the insurance may cover a reason the user gave in words we do not recognise
    hours = hours_between(res.get("created_at", ""), world.now)
    booked = f"booked {res.get('created_at')}" + (f", {hours:.0f} h before {world.now}" if hours is not None else "")
    if _claims_recent(ev, call):
        ev.add(DATE, LACKING, f"cancelled {rid} as if booked within 24 hours, but it was {booked}", rule="24h_window_misjudged",
               at=call.message_index, values={**facts, "hours_since_booking": None if hours is None else round(hours, 1)})  # fmt: skip
        return
    if res.get("insurance") == "yes" and words is not None:
        cited = re.search(r"\binsur", ev.agent_text_before(call.message_index, last=2) + " " + _reply_after(ev, call), re.I)
        ev.add(POLICY, LACKING, f"cancelled {rid} on its insurance for a reason it does not cover ({words!r}); insurance covers health or "
                                "weather only, and no other ground holds", rule="insurance_reason_not_covered", at=call.message_index,
               values={**facts, "reason_given": words, "agent_cited_insurance": bool(cited)}, confidence=TEXT if cited else 0.45)  # fmt: skip
        return
    ev.add(POLICY, LACKING, f"cancelled {rid} though no ground holds: {booked}, {res.get('cabin')}, insurance {res.get('insurance')}, "
                            f"reason {reason or 'not given'}, no flight cancelled by the airline", rule="cancel_without_ground",
           at=call.message_index, values=facts)  # fmt: skip


def _reply_after(ev: Evidence, call: AgentCall) -> str:
    after = call.result_index if call.result_index is not None else call.message_index
    return next((u.text for u in ev.said if u.role == "assistant" and u.index > after), "")


def _last_24h_claim(text: str) -> str | None:
    """``within`` or ``beyond``: the last thing a message says about the 24-hour window, if anything."""
    claims = [(m.start(), "within") for m in WITHIN_24H.finditer(text)] + [(m.start(), "beyond") for m in BEYOND_24H.finditer(text)]
    return max(claims)[1] if claims else None


def _claims_recent(ev: Evidence, call: AgentCall) -> bool:
    """Whether the agent acted on the belief that the booking was within 24 hours: its latest statement about
    the window before the call, or else the explanation it gave right after."""
    before = [u.text for u in ev.said if u.role == "assistant" and u.index <= call.message_index]
    for text in reversed(before):
        claim = _last_24h_claim(text)
        if claim:
            return claim == "within"
    return _last_24h_claim(_reply_after(ev, call)) == "within"


def _update_flights(ev: Evidence, call: AgentCall, world: World) -> None:
    res = _read_reservation(ev, call, world)
    if res is None:
        return
    args = call.arguments or {}
    rid, cabin = res["reservation_id"], args.get("cabin")
    new = [f for f in args.get("flights") or [] if isinstance(f, dict)]
    old = {(s["flight_number"], s["date"]) for s in res["flights"]}
    added = [(f.get("flight_number"), f.get("date")) for f in new if (f.get("flight_number"), f.get("date")) not in old]
    unseen = [f"{n} {d}" for n, d in added if (n, d) not in world.searched and (n, d) not in world.statuses_checked]
    where = {"at": call.message_index}
    facts = {"reservation": rid, "cabin": res.get("cabin"), "new_cabin": cabin, "old_flights": segments(res), "new_flights": [f"{n} {d}" for n, d in added]}
    if unseen:
        ev.add(PRE, LACKING, f"put {', '.join(unseen)} on {rid} without a search showing it available", rule="flight_not_searched",
               values={**facts, "unsearched": unseen}, confidence=RECORD, **where)  # fmt: skip
    else:
        ev.add(PRE, PRESENT, f"read {rid} and searched its new flights")
    if cabin and cabin != res["cabin"] and kit.cabin_change_problems(res, world.flights):
        ev.add(POLICY, LACKING, f"changed the cabin of {rid} although part of the trip had flown", rule="cabin_change_after_flown", values=facts, **where)
        return
    if added:
        problems = [p for p in kit.flight_change_problems(res, new, world.flights) if p != "unknown_flight"]
        if "basic_economy" in problems and cabin == "basic_economy":
            ev.add(POLICY, LACKING, f"changed the flights of basic economy reservation {rid}, which the policy forbids", rule="basic_economy_flights_changed",
                   values=facts, **where)  # fmt: skip
            return
        if "basic_economy" in problems:  # one call that upgrades the cabin and changes the flights: the flights changed while basic economy
            ev.add(POLICY, LACKING, f"changed the flights of basic economy reservation {rid} in the call that upgraded it to {cabin}; the policy "
                                    "allows the cabin change on the same flights first, and flight changes only after it",
                   rule="basic_economy_flights_changed_with_upgrade", values=facts, **where)  # fmt: skip
            return
        ends = [p for p in problems if p in ("origin_changed", "destination_changed")]
        leg = _one_leg_only(res, new, world)
        if ends and leg:
            ev.add("tool_calling_precision", LACKING, f"update_reservation_flights on round trip {rid} lists only the {leg} flights; the "
                                                      "call replaces the whole itinerary, so the other direction is dropped",
                   rule="one_leg_replaces_itinerary", values={**facts, "leg": leg}, **where)  # fmt: skip
            return
        if ends:
            ev.add(POLICY, LACKING, f"changed {rid} with {ends[0].replace('_', ' ')}; the policy keeps origin, destination and trip type",
                   rule="trip_ends_changed", values={**facts, "origin": res.get("origin"), "destination": res.get("destination")}, **where)  # fmt: skip
            return
    ev.add(POLICY, PRESENT, f"changed {rid} within the policy")


def _one_leg_only(res: dict[str, Any], new: list[dict[str, Any]], world: World) -> str | None:
    """For a round trip, new flights that cover only one direction: the agent meant to change that leg and
    forgot that the tool takes the whole itinerary (the other leg is dropped)."""
    if res.get("flight_type") != "round_trip" or not new:
        return None
    first, last = world.flights.get(new[0].get("flight_number") or ""), world.flights.get(new[-1].get("flight_number") or "")
    if not first or not last:
        return None
    start, end = first.get("origin"), last.get("destination")
    if start == res["destination"] and end == res["origin"]:
        return "return"
    if start == res["origin"] and end == res["destination"]:
        return "outbound"
    return None


def _bags(ev: Evidence, call: AgentCall, world: World) -> None:
    res = _read_reservation(ev, call, world)
    if res is None:
        return
    args = call.arguments or {}
    total, nonfree = args.get("total_baggages"), args.get("nonfree_baggages")
    if not isinstance(total, int) or not isinstance(nonfree, int):
        return
    facts = {"reservation": res["reservation_id"], "bags_before": res.get("total_baggages", 0), "total_baggages": total, "nonfree_baggages": nonfree}
    if total < res.get("total_baggages", 0):
        ev.add(POLICY, LACKING, f"removed checked bags from {res['reservation_id']}; the policy only lets bags be added", rule="bags_removed",
               at=call.message_index, values=facts)  # fmt: skip
        return
    ev.add(POLICY, PRESENT, "added bags")
    user = world.users.get(res.get("user_id", ""))
    if user is None or user.get("membership") not in kit.FREE_BAGS:
        ev.add(PRE, LACKING, f"set the paid bags of {res['reservation_id']} without reading the user's membership (the free allowance)",
               rule="bags_without_membership", at=call.message_index, values=facts, confidence=RECORD)  # fmt: skip
        return
    expected = kit.add_bags(res, user["membership"], total - res.get("total_baggages", 0))["nonfree_baggages"]
    _paid_bags(ev, call, res["reservation_id"], (total, nonfree, expected), user["membership"], res["cabin"], len(res["passengers"]))


def _paid_bags(ev: Evidence, call: AgentCall, what: str, bags: tuple[int, int, int], membership: str, cabin: str, passengers: int) -> None:
    """The paid-bag figure the agent sent against the one the policy's allowance gives: (total, paid, expected)."""
    total, nonfree, expected = bags
    if nonfree != expected:
        ev.add(DATA, LACKING, f"{what}: {nonfree} paid bag(s) of {total}; a {membership} member in {cabin} with {passengers} passenger(s) pays "
                              f"for {expected}", rule="paid_bags_miscounted", at=call.message_index, confidence=RECORD,
               values={"total_baggages": total, "nonfree_baggages": nonfree, "expected_nonfree": expected, "membership": membership,
                       "cabin": cabin, "passengers": passengers})  # fmt: skip
    else:
        ev.add(DATA, PRESENT, "paid bags computed right")


def _passengers(ev: Evidence, call: AgentCall, world: World) -> None:
    res = _read_reservation(ev, call, world)
    if res is None:
        return
    count, before = len((call.arguments or {}).get("passengers") or []), len(res.get("passengers", []))
    if count == before:
        ev.add(POLICY, PRESENT, "passenger details changed, count kept")
        return
    facts = {"reservation": res["reservation_id"], "passengers_before": before, "passengers_sent": count}
    asked_removal = re.search(r"\b(remove|drop|take off|delete|without)\b", ev.user_text_before(call.message_index), re.I)
    if asked_removal or count > before:
        ev.add(POLICY, LACKING, f"changed the number of passengers of {res['reservation_id']} ({before} to {count}), which nobody may do",
               rule="passenger_count_changed", at=call.message_index, values=facts)  # fmt: skip
    else:
        ev.add("tool_calling_precision", LACKING, f"update_reservation_passengers on {res['reservation_id']} lists {count} of its {before} "
                                                  "passengers; the tool replaces the whole list, and nobody asked to remove one",
               rule="passenger_list_incomplete", at=call.message_index, values=facts, confidence=RECORD)  # fmt: skip


def _book(ev: Evidence, call: AgentCall, world: World) -> None:
    args = call.arguments or {}
    user = world.users.get(args.get("user_id", ""))
    flights = [(f.get("flight_number"), f.get("date")) for f in args.get("flights") or [] if isinstance(f, dict)]
    unseen = [f"{n} {d}" for n, d in flights if (n, d) not in world.searched]
    where = {"at": call.message_index, "confidence": RECORD}
    if user is None:
        ev.add(PRE, LACKING, "booked without reading the user's profile (payment methods, membership)", rule="book_without_profile",
               values={"user": args.get("user_id")}, **where)  # fmt: skip
    elif unseen:
        ev.add(PRE, LACKING, f"booked {', '.join(unseen)} without a search showing it available", rule="flight_not_searched",
               values={"unsearched": unseen}, **where)  # fmt: skip
    else:
        ev.add(PRE, PRESENT, "read the profile and searched the flights before booking")
    passengers = args.get("passengers") or []
    payments = [p for p in args.get("payment_methods") or [] if isinstance(p, dict) and "payment_id" in p]
    if len(passengers) > kit.MAX_PASSENGERS:
        ev.add(POLICY, LACKING, f"booked {len(passengers)} passengers; a reservation holds at most {kit.MAX_PASSENGERS}", rule="too_many_passengers",
               at=call.message_index, values={"passengers": len(passengers), "most": kit.MAX_PASSENGERS})  # fmt: skip
    elif user is not None and kit.payment_problems(payments, user):
        problems = kit.payment_problems(payments, user)
        ev.add(POLICY, LACKING, f"booking payment breaks the policy: {', '.join(problems)}", rule="booking_payment_rules",
               at=call.message_index, values={"payments": [p.get("payment_id") for p in payments], "problems": problems})  # fmt: skip
    elif user is not None:
        ev.add(POLICY, PRESENT, "booking within the policy")
    check_route(ev, call, world)
    total, nonfree, cabin = args.get("total_baggages"), args.get("nonfree_baggages"), args.get("cabin")
    if user is not None and isinstance(total, int) and isinstance(nonfree, int) and cabin in kit.FREE_BAGS.get(user.get("membership"), {}):
        expected = max(0, total - kit.free_bags(user["membership"], cabin, len(passengers)))
        _paid_bags(ev, call, "booking", (total, nonfree, expected), user["membership"], cabin, len(passengers))


def check_route(ev: Evidence, call: AgentCall, world: World) -> None:
    """A booking's flights must make the trip it books (a round trip must come back): checked on every
    attempt, since picking the wrong flights from a search is wrong whether or not the payment went through."""
    args = call.arguments or {}
    legs = [world.flights.get(f.get("flight_number") or "") for f in args.get("flights") or [] if isinstance(f, dict)]
    if not legs or not all(leg and leg.get("origin") and leg.get("destination") for leg in legs):
        return
    start, end = args.get("origin"), args.get("origin") if args.get("flight_type") == "round_trip" else args.get("destination")
    route = [legs[0]["origin"]] + [leg["destination"] for leg in legs]
    if route[0] != start or route[-1] != end or args.get("destination") not in route:
        chosen = ", ".join(f"{leg['origin']}→{leg['destination']}" for leg in legs)
        ev.add(DATA, LACKING, f"booked {chosen} for a {str(args.get('flight_type', '')).replace('_', ' ')} {args.get('origin')}→{args.get('destination')}: "
                              "the flights chosen from the search do not make that trip", rule="flights_do_not_make_the_trip",
               at=call.message_index, values={"route": route, "origin": args.get("origin"), "destination": args.get("destination"),
                                              "flight_type": args.get("flight_type")}, confidence=RECORD)  # fmt: skip


def _complaint(text: str) -> str | None:
    delayed, cancelled = bool(_COMPLAINT_DELAY.search(text)), bool(_COMPLAINT_CANCEL.search(text))
    return "cancelled" if cancelled and not delayed else "delayed" if delayed and not cancelled else None


def _certificate(ev: Evidence, call: AgentCall, world: World) -> None:
    args = call.arguments or {}
    uid, amount = args.get("user_id"), args.get("amount")
    user = world.users.get(uid) if isinstance(uid, str) else None
    mine = [r for r in world.reservations.values() if r.get("user_id") == uid]
    where = {"at": call.message_index}
    if user is None or not mine:
        ev.add(PRE, LACKING, "sent a certificate without confirming the facts (the user's profile and reservation)", rule="compensation_unchecked",
               values={"user_read": user is not None, "reservations_read": len(mine), "amount": amount}, confidence=RECORD, **where)  # fmt: skip
        return
    ev.add(PRE, PRESENT, "confirmed the facts before compensating")
    first_offer = next((u.index for u in ev.said if u.role == "assistant" and re.search(r"certificate|compensat|voucher", u.text, re.I)), call.message_index)
    if not _ASKED_COMPENSATION.search(ev.user_text_before(first_offer)):
        ev.add(POLICY, LACKING, "offered compensation the user had not asked for", rule="compensation_unasked", at=first_offer,
               values={"amount": amount}, confidence=TEXT)  # fmt: skip
        return
    complaint = _complaint(ev.user_text_before(call.message_index))
    facts = {"membership": user.get("membership"), "amount": amount, "complaint": complaint}
    if complaint is None:
        ev.add(POLICY, LACKING, "sent a certificate although the user complained of neither a cancelled nor a delayed flight",
               rule="compensation_without_ground", values=facts, **where)  # fmt: skip
        return
    allowed = max(kit.compensation(user, r, complaint) for r in mine)
    changed = [c for c in ev.writes if c.message_index < call.message_index and c.name in ("cancel_reservation", "update_reservation_flights")]
    if allowed == 0:
        ev.add(POLICY, LACKING, f"compensated a {user.get('membership')} member with no insurance, not flying business", rule="compensation_ineligible",
               values=facts, **where)  # fmt: skip
    elif complaint == "delayed" and not changed:
        ev.add(POLICY, LACKING, "sent a certificate for a delayed flight although the reservation was neither changed nor cancelled; the policy "
                                "offers it only after a change or cancellation", rule="delay_compensation_without_change", values=facts, **where)  # fmt: skip
    elif isinstance(amount, (int, float)) and amount > allowed:
        ev.add(POLICY, LACKING, f"sent a ${amount:g} certificate; for a {complaint} flight the policy allows at most ${allowed}",
               rule="compensation_too_high", values={**facts, "most": allowed}, **where)  # fmt: skip
    else:
        ev.add(POLICY, PRESENT, "compensation within the policy")


WRITES = {
    "cancel_reservation": _cancel,
    "update_reservation_flights": _update_flights,
    "update_reservation_baggages": _bags,
    "update_reservation_passengers": _passengers,
    "book_reservation": _book,
    "send_certificate": _certificate,
}


_COUNT_ERROR = re.compile(r"number of passengers does not match", re.IGNORECASE)


def judge(ev: Evidence) -> None:
    for call in ev.writes:
        handler = WRITES.get(call.name)
        if handler is not None:
            handler(ev, call, ev.world_before(call.message_index))
    for call in ev.calls:
        if call.arguments is None or call.succeeded:
            continue
        if call.name == "book_reservation":
            check_route(ev, call, ev.world_before(call.message_index))
        elif call.name == "update_reservation_passengers" and _COUNT_ERROR.search(call.result or ""):
            _passengers(ev, call, ev.world_before(call.message_index))  # the attempt is the decision, refused or not
    refusals_airline.judge(ev)
