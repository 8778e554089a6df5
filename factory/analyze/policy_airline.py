"""τ² airline: the agent's decisions judged against the policy, on the records it had read.

Each state-changing call is judged three ways: did the agent read what the policy makes the action
conditional on (precondition_verification), does the policy allow the action on those records
(policy_application; the 24-hour window and flown segments are datetime_reasoning), and are the counts and
fees right (structured_data_reasoning). Each refusal is judged the same way: refusing what the policy
allows is a policy-application failure. The policy itself comes from ``trace_env.kits.tau2_airline``.
"""

from __future__ import annotations

import re
from typing import Any

from trace_env.kits import tau2_airline as kit

from factory.analyze.calls import AgentCall
from factory.analyze.conversation import BEYOND_24H, FLOWN_WORDS, WITHIN_24H, ids_in, reason_category
from factory.analyze.evidence import LACKING, PRESENT, Evidence
from factory.analyze.world import World, hours_between

PRE, POLICY, DATA, DATE, ESCALATE = (
    "precondition_verification", "policy_application", "structured_data_reasoning", "datetime_reasoning", "escalation_judgment",
)  # fmt: skip
_COMPLAINT_DELAY = re.compile(r"\bdelay", re.IGNORECASE)
_COMPLAINT_CANCEL = re.compile(r"\b(flight|airline)\b[^.]{0,40}\bcancel+ed\b|\bcancel+ed (flight|by)\b", re.IGNORECASE)
_ASKED_COMPENSATION = re.compile(r"\b(compensat\w*|certificate|voucher|refund|credit|reimburs\w*|make (it|this|up)|gesture)\b", re.IGNORECASE)
_FLIGHT = re.compile(r"^HAT\d{3}$")
_CABIN_REASON = re.compile(r"\b(basic economy|business (class|cabin|fare|ticket|reservation)|(is|in|an?) (economy|business))\b", re.IGNORECASE)
_OTHER_REASON = re.compile(r"\b(seat|availab|sold out|no (direct |nonstop )?flights?|origin|destination|trip type|balance|payment|"
                           r"one passenger|only (one|some)|just (one|me|myself|the)|each passenger|all passengers|same cabin|separate|individual|outbound|"
                           r"return flight|segment|one flight)", re.IGNORECASE)


def _segments(res: dict[str, Any]) -> str:
    return ", ".join(f"{s.get('flight_number')} {s.get('date')}" for s in res.get("flights", []))


def _read_reservation(ev: Evidence, call: AgentCall, world: World) -> dict[str, Any] | None:
    rid = (call.arguments or {}).get("reservation_id")
    res = world.reservations.get(rid) if isinstance(rid, str) else None
    if res is None:
        ev.add(PRE, LACKING, f"{call.name}({rid!r}) made without reading that reservation first")
    return res


def _cancel(ev: Evidence, call: AgentCall, world: World) -> None:
    res = _read_reservation(ev, call, world)
    if res is None:
        return
    rid = res["reservation_id"]
    said_before = ev.user_text_before(call.message_index)
    reason = reason_category(said_before)
    if reason is None and "reason" not in ev.agent_text_before(call.message_index, last=50).lower():
        ev.add(PRE, LACKING, f"cancelled {rid} without obtaining the reason for cancellation, which the policy requires")
    else:
        ev.add(PRE, PRESENT, f"read {rid} and the reason before cancelling")
    check = kit.cancellation_check(res, world.flights, world.now, reason)
    if check.flown:
        flown = ", ".join(f"{s['flight_number']} {s['date']}" for s in check.flown)
        ev.add(POLICY, LACKING, f"cancelled {rid} although {flown} had already flown (the policy sends this to a human agent)")
        return
    if check.eligible:
        ev.add(POLICY, PRESENT, f"cancelled {rid}, allowed ({check.rule})")
        return
    unknown = [s for s in res["flights"] if kit.segment_status(s, world.flights) is None]
    if reason == "airline_cancelled" and unknown:
        ev.add(PRE, LACKING, f"cancelled {rid} on the user's word that the airline cancelled, without checking its flights' status")
        return
    if res.get("insurance") == "yes" and reason is None:
        return  # the insurance may cover a reason the user gave in words we do not recognise
    hours = hours_between(res.get("created_at", ""), world.now)
    booked = f"booked {res.get('created_at')}" + (f", {hours:.0f} h before {world.now}" if hours is not None else "")
    if _claims_recent(ev, call):
        ev.add(DATE, LACKING, f"cancelled {rid} as if booked within 24 hours, but it was {booked}")
        return
    ev.add(POLICY, LACKING, f"cancelled {rid} though no ground holds: {booked}, {res.get('cabin')}, insurance {res.get('insurance')}, "
                            f"reason {reason or 'not given'}, no flight cancelled by the airline")  # fmt: skip


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
    return _last_24h_claim(_next_agent_text(ev, call)) == "within"


def _next_agent_text(ev: Evidence, call: AgentCall) -> str:
    """What the agent said right after a call: often the reason it acted on."""
    after = call.result_index if call.result_index is not None else call.message_index
    return next((u.text for u in ev.said if u.role == "assistant" and u.index > after), "")


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
    if unseen:
        ev.add(PRE, LACKING, f"put {', '.join(unseen)} on {rid} without a search showing it available")
    else:
        ev.add(PRE, PRESENT, f"read {rid} and searched its new flights")
    if cabin and cabin != res["cabin"] and kit.cabin_change_problems(res, world.flights):
        ev.add(POLICY, LACKING, f"changed the cabin of {rid} although part of the trip had flown")
        return
    if added:
        problems = [p for p in kit.flight_change_problems(res, new, world.flights) if p != "unknown_flight"]
        if "basic_economy" in problems and cabin == "basic_economy":
            ev.add(POLICY, LACKING, f"changed the flights of basic economy reservation {rid}, which the policy forbids")
            return
        ends = [p for p in problems if p in ("origin_changed", "destination_changed")]
        leg = _one_leg_only(res, new, world)
        if ends and leg:
            ev.add("tool_calling_precision", LACKING, f"update_reservation_flights on round trip {rid} lists only the {leg} flights; the "
                                                      "call replaces the whole itinerary, so the other direction is dropped")  # fmt: skip
            return
        if ends:
            ev.add(POLICY, LACKING, f"changed {rid} with {ends[0].replace('_', ' ')}; the policy keeps origin, destination and trip type")
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
    if total < res.get("total_baggages", 0):
        ev.add(POLICY, LACKING, f"removed checked bags from {res['reservation_id']}; the policy only lets bags be added")
        return
    ev.add(POLICY, PRESENT, "added bags")
    user = world.users.get(res.get("user_id", ""))
    if user is None or user.get("membership") not in kit.FREE_BAGS:
        ev.add(PRE, LACKING, f"set the paid bags of {res['reservation_id']} without reading the user's membership (the free allowance)")
        return
    expected = kit.add_bags(res, user["membership"], total - res.get("total_baggages", 0))["nonfree_baggages"]
    _paid_bags(ev, res["reservation_id"], (total, nonfree, expected), user["membership"], res["cabin"], len(res["passengers"]))


def _paid_bags(ev: Evidence, what: str, bags: tuple[int, int, int], membership: str, cabin: str, passengers: int) -> None:
    """The paid-bag figure the agent sent against the one the policy's allowance gives: (total, paid, expected)."""
    total, nonfree, expected = bags
    if nonfree != expected:
        ev.add(DATA, LACKING, f"{what}: {nonfree} paid bag(s) of {total}; a {membership} member in {cabin} with "
                              f"{passengers} passenger(s) pays for {expected}")  # fmt: skip
    else:
        ev.add(DATA, PRESENT, "paid bags computed right")


def _passengers(ev: Evidence, call: AgentCall, world: World) -> None:
    res = _read_reservation(ev, call, world)
    if res is None:
        return
    count = len((call.arguments or {}).get("passengers") or [])
    if count != len(res.get("passengers", [])):
        ev.add(POLICY, LACKING, f"changed the number of passengers of {res['reservation_id']} ({len(res['passengers'])} to {count}), which nobody may do")
    else:
        ev.add(POLICY, PRESENT, "passenger details changed, count kept")


def _book(ev: Evidence, call: AgentCall, world: World) -> None:
    args = call.arguments or {}
    user = world.users.get(args.get("user_id", ""))
    flights = [(f.get("flight_number"), f.get("date")) for f in args.get("flights") or [] if isinstance(f, dict)]
    unseen = [f"{n} {d}" for n, d in flights if (n, d) not in world.searched]
    if user is None:
        ev.add(PRE, LACKING, "booked without reading the user's profile (payment methods, membership)")
    elif unseen:
        ev.add(PRE, LACKING, f"booked {', '.join(unseen)} without a search showing it available")
    else:
        ev.add(PRE, PRESENT, "read the profile and searched the flights before booking")
    passengers = args.get("passengers") or []
    payments = [p for p in args.get("payment_methods") or [] if isinstance(p, dict) and "payment_id" in p]
    if len(passengers) > kit.MAX_PASSENGERS:
        ev.add(POLICY, LACKING, f"booked {len(passengers)} passengers; a reservation holds at most {kit.MAX_PASSENGERS}")
    elif user is not None and kit.payment_problems(payments, user):
        ev.add(POLICY, LACKING, f"booking payment breaks the policy: {', '.join(kit.payment_problems(payments, user))}")
    elif user is not None:
        ev.add(POLICY, PRESENT, "booking within the policy")
    _check_route(ev, call, world)
    total, nonfree, cabin = args.get("total_baggages"), args.get("nonfree_baggages"), args.get("cabin")
    if user is not None and isinstance(total, int) and isinstance(nonfree, int) and cabin in kit.FREE_BAGS.get(user.get("membership"), {}):
        expected = max(0, total - kit.free_bags(user["membership"], cabin, len(passengers)))
        _paid_bags(ev, "booking", (total, nonfree, expected), user["membership"], cabin, len(passengers))


def _check_route(ev: Evidence, call: AgentCall, world: World) -> None:
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
                              "the flights chosen from the search do not make that trip")  # fmt: skip


def _complaint(text: str) -> str | None:
    delayed, cancelled = bool(_COMPLAINT_DELAY.search(text)), bool(_COMPLAINT_CANCEL.search(text))
    return "cancelled" if cancelled and not delayed else "delayed" if delayed and not cancelled else None


def _certificate(ev: Evidence, call: AgentCall, world: World) -> None:
    args = call.arguments or {}
    uid, amount = args.get("user_id"), args.get("amount")
    user = world.users.get(uid) if isinstance(uid, str) else None
    mine = [r for r in world.reservations.values() if r.get("user_id") == uid]
    if user is None or not mine:
        ev.add(PRE, LACKING, "sent a certificate without confirming the facts (the user's profile and reservation)")
        return
    ev.add(PRE, PRESENT, "confirmed the facts before compensating")
    first_offer = next((u.index for u in ev.said if u.role == "assistant" and re.search(r"certificate|compensat|voucher", u.text, re.I)), call.message_index)
    if not _ASKED_COMPENSATION.search(ev.user_text_before(first_offer)):
        ev.add(POLICY, LACKING, "offered compensation the user had not asked for")
        return
    complaint = _complaint(ev.user_text_before(call.message_index))
    if complaint is None:
        ev.add(POLICY, LACKING, "sent a certificate although the user complained of neither a cancelled nor a delayed flight")
        return
    allowed = max(kit.compensation(user, r, complaint) for r in mine)
    if allowed == 0:
        ev.add(POLICY, LACKING, f"compensated a {user.get('membership')} member with no insurance, not flying business")
    elif isinstance(amount, (int, float)) and amount > allowed:
        ev.add(POLICY, LACKING, f"sent a ${amount:g} certificate; for a {complaint} flight the policy allows at most ${allowed}")
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


def _targets(sentence: str, text: str, world: World) -> list[dict[str, Any]]:
    """The reservations a refusal is about: those it names; else the only one its message names; else the only
    one the agent has read. Anything vaguer ("these reservations") is not judged."""
    ids = [i for i in ids_in(sentence) if i in world.reservations]
    if not ids:
        known = {r for u in world.users.values() for r in u.get("reservations") or []} | set(world.reservations)
        named = [i for i in ids_in(text) if (i in known or any(c.isdigit() for c in i)) and i not in world.flights and not _FLIGHT.match(i)]
        if len(named) == 1 and named[0] in world.reservations:
            ids = named
        elif not named and len(world.reservations) == 1:
            ids = list(world.reservations)
    return [world.reservations[i] for i in ids]


def _refused_cancel(ev: Evidence, index: int, sentence: str, res: dict[str, Any], world: World) -> None:
    rid = res["reservation_id"]
    check = kit.cancellation_check(res, world.flights, world.now, reason_category(ev.user_text_before(index)))
    if check.flown:
        ev.add(POLICY, PRESENT, f"declined to cancel {rid}, which had flown")
        return
    grounds = check.grounds
    if not grounds:
        if FLOWN_WORDS.search(sentence):
            ev.add(DATE, LACKING, f"said {rid} had flown, but its flights ({_segments(res)}) are not before {world.now[:10]}")
        else:
            ev.add(POLICY, PRESENT, f"declined to cancel {rid}, which no ground allows")
            if BEYOND_24H.search(sentence):
                ev.add(DATE, PRESENT, f"{rid} was booked more than 24 hours before {world.now}")
        return
    if "recent_booking" in grounds and BEYOND_24H.search(sentence):
        ev.add(DATE, LACKING, f"refused to cancel {rid} as booked over 24 hours ago, but it was booked {res.get('created_at')}, within 24 h of {world.now}")
    elif FLOWN_WORDS.search(sentence):
        ev.add(DATE, LACKING, f"said {rid} had flown, but its flights ({_segments(res)}) are not before {world.now[:10]}")
    else:
        ev.add(POLICY, LACKING, f"refused to cancel {rid} although the policy allows it ({', '.join(grounds)})")


def _cited_cabin(sentence: str) -> str | None:
    """The cabin a refusal gives as its reason (the most specific one named)."""
    match = _CABIN_REASON.search(sentence)
    if not match:
        return None
    text = match.group(0).lower()
    return "basic_economy" if "basic" in text else "business" if "business" in text else "economy"


def _refused_cabin(ev: Evidence, sentence: str, res: dict[str, Any], world: World) -> None:
    """Only a refusal that cites the reservation's cabin is judged: other reasons (one passenger only, seats,
    budget) may be right and are not what the records decide."""
    rid = res["reservation_id"]
    if kit.cabin_change_problems(res, world.flights):
        ev.add(POLICY, PRESENT, f"declined a cabin change on {rid}, which had flown")
    elif _cited_cabin(sentence) == res.get("cabin") and not _OTHER_REASON.search(sentence):
        ev.add(POLICY, LACKING, f"refused a cabin change on {rid} because of its cabin ({res.get('cabin')}); the policy allows cabin changes, "
                                "basic economy included, until a flight has flown")  # fmt: skip


def judge_refusals(ev: Evidence) -> None:
    judged: set[tuple[str, str]] = set()
    for utterance, world, action, sentence in ev.refusals():
        for res in _targets(sentence, utterance.text, world):
            rid = res["reservation_id"]
            if (action, rid) in judged:
                continue
            judged.add((action, rid))
            later = [c for c in ev.later_writes(utterance.index) if (c.arguments or {}).get("reservation_id") == rid]
            if action == "cancel" and not any(c.name == "cancel_reservation" for c in later):
                _refused_cancel(ev, utterance.index, sentence, res, world)
            elif action == "change_cabin" and not any(c.name == "update_reservation_flights" for c in later):
                _refused_cabin(ev, sentence, res, world)
            elif action == "change_flights" and re.search(r"basic economy", sentence, re.I) and not later:
                if res.get("cabin") == "basic_economy":
                    ev.add(POLICY, PRESENT, f"declined to change the flights of basic economy reservation {rid}")
                else:
                    ev.add(DATA, LACKING, f"called {rid} basic economy, but its cabin is {res.get('cabin')}")
            elif action == "add_bags" and not re.search(r"remov|fewer|reduce", sentence, re.I) and not _OTHER_REASON.search(sentence) and not later:
                ev.add(POLICY, LACKING, f"refused to add checked bags to {rid}, which the policy always allows")


def judge_escalation(ev: Evidence) -> None:
    """The policy sends a cancellation of a partly flown trip to a human agent."""
    judged: set[str] = set()
    for utterance in ev.said:
        if utterance.role != "user" or not re.search(r"\bcancel", utterance.text, re.I):
            continue
        for rid in sorted(ids_in(utterance.text) - judged):
            res = ev.final_world.reservations.get(rid)
            if res is None or not kit.flown_segments(res, ev.final_world.flights):
                continue
            judged.add(rid)
            if any(c.name == "transfer_to_human_agents" and c.message_index > utterance.index for c in ev.calls):
                ev.add(ESCALATE, PRESENT, f"transferred the cancellation of {rid}, part of which had flown")
            else:
                ev.add(ESCALATE, LACKING, f"did not transfer the cancellation of {rid}, part of which had flown, as the policy requires")


def judge(ev: Evidence) -> None:
    for call in ev.writes:
        handler = WRITES.get(call.name)
        if handler is not None:
            handler(ev, call, ev.world_before(call.message_index))
    for call in ev.calls:
        if call.name == "book_reservation" and call.arguments is not None and not call.succeeded:
            _check_route(ev, call, ev.world_before(call.message_index))
    judge_refusals(ev)
    judge_escalation(ev)
