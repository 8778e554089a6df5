"""What the user said against what the agent's calls did, on τ² airline (real agents' commonest slips).

- tool_calling_precision: a booking with checked bags after the user said they need none; a charge to a payment
  method nobody named (the user said nothing about payment, the agent never said which method it would use,
  and the profile held more than one);
- structured_data_reasoning: asked for the cheapest itinerary (with no other wish that could rule one out), choosing
  one that the agent's own search of that route and date showed a cheaper one to;
- policy_application: refusing the user's plan of separate reservations (one certificate each) as if the policy
  forbade it: the policy limits certificates per reservation, not reservations per user.

Judged on English (TEXT confidence); a later user message that asks for bags or names a method lifts the finding.
"""

from __future__ import annotations

import json
import re
from typing import Any

from factory.analyze.calls import AgentCall
from factory.analyze.conversation import sentences
from factory.analyze.evidence import LACKING, TEXT, Evidence

CALLS, POLICY, DATA = "tool_calling_precision", "policy_application", "structured_data_reasoning"
_NO_BAGS = re.compile(r"\b(no|zero|without( any)?|(don['’]?t|do not|won['’]?t) (need|want|have)\b[^.,;]{0,30}?\b(any)?)\s+"
                      r"(extra\s+|additional\s+)?(checked\s+)?(bags?|baggages?|luggage)\b", re.IGNORECASE)
_WANTS_BAGS = re.compile(r"\b(\d+|one|two|three|four|five|a|an)\s+(checked\s+)?(bags?|baggages?|luggage)\b|\badd\b[^.]{0,20}\bbag", re.IGNORECASE)
_FREE = re.compile(r"\bfree\b[^.]{0,20}\b(allowance|bags?|baggage)|\ballowance\b", re.IGNORECASE)
_PAY_WORDS = re.compile(r"\b(card|gift|certificate|voucher|paypal|visa|mastercard|amex|pay|payment|charge|bill)\w*", re.IGNORECASE)
_SOURCE_WISH = re.compile(r"\b(gift[ -]?cards?|certificates?|paypal|cards?)\b", re.IGNORECASE)


def _source(wish: str) -> str:
    wish = wish.lower()
    return "gift_card" if "gift" in wish else "certificate" if "certif" in wish else "paypal" if "paypal" in wish else "credit_card"


_CHARGES = ("book_reservation", "update_reservation_flights", "update_reservation_baggages")
_SEPARATE = re.compile(r"\b(separate|split|individual|multiple|three|two)\b[^.]{0,40}\b(reservations?|bookings?)\b", re.IGNORECASE)
_REFUSE = re.compile(r"\b(cannot|can['’]?t|can not|unable|not (able|allowed|permitted|possible)|does not (allow|permit)|doesn['’]?t (allow|permit)|"
                     r"against (the |our )?policy|not something i can)\b", re.IGNORECASE)


def _bags_declined(ev: Evidence) -> None:
    for call in ev.calls:
        if call.name != "book_reservation" or call.error or not isinstance(call.arguments, dict):
            continue
        bags = call.arguments.get("total_baggages")
        if not isinstance(bags, int) or bags <= 0:
            continue
        users = [u for u in ev.said if u.role == "user" and u.index < call.message_index]
        said = [(u, m) for u in users for s in sentences(u.text) for m in [_NO_BAGS.search(s)] if m and not _WANTS_BAGS.search(s) and not _FREE.search(s)]
        if not said:
            continue
        last, match = said[-1]
        if any(_WANTS_BAGS.search(u.text) for u in users if u.index > last.index):
            continue
        ev.add(CALLS, LACKING, f"booked with {bags} checked bag(s) after the user said {match.group(0)!r}", rule="bags_the_user_declined",
               at=call.message_index, values={"total_baggages": bags, "user_said": match.group(0), "said_at": last.index}, confidence=TEXT)  # fmt: skip
        return


def _methods(ev: Evidence, before: int) -> dict[str, dict[str, Any]]:
    world = ev.world_before(before)
    return {k: m for u in world.users.values() for k, m in (u.get("payment_methods") or {}).items() if isinstance(m, dict)}


def _charged_ids(call: AgentCall) -> list[str]:
    args = call.arguments or {}
    if call.name == "update_reservation_baggages" and not args.get("nonfree_baggages"):
        return []  # nothing charged
    ids = [args.get("payment_id")] + [p.get("payment_id") for p in args.get("payment_methods") or [] if isinstance(p, dict)]
    return [i for i in ids if isinstance(i, str)]


def _original(ev: Evidence, call: AgentCall) -> set[str]:
    """The methods that paid for the reservation a call changes: charging or refunding them is the default."""
    res = ev.world_before(call.message_index).reservations.get(str((call.arguments or {}).get("reservation_id")))
    return {str(p.get("payment_id")) for p in (res or {}).get("payment_history") or [] if isinstance(p, dict)}


def _named(text: str, payment_id: str, method: dict[str, Any]) -> bool:
    source = str(method.get("source", "")).replace("_", " ")
    last_four = str(method.get("last_four") or "")
    return payment_id in text or bool(last_four and last_four in text) or bool(source and re.search(rf"\b{re.escape(source)}", text, re.IGNORECASE))


def _payment_nobody_named(ev: Evidence) -> None:
    for call in ev.calls:
        if call.name not in _CHARGES or call.error or not isinstance(call.arguments, dict):
            continue
        users = "\n".join(u.text for u in ev.said if u.role == "user" and u.index < call.message_index)
        if _PAY_WORDS.search(users):
            return  # the user spoke about payment: other rules compare what they asked for
        methods = _methods(ev, call.message_index)
        wished = _SOURCE_WISH.findall(ev.instructions)
        if len(methods) < 2 or not wished:
            continue  # nothing shows the choice mattered to the user
        agent = "\n".join(u.text for u in ev.said if u.role == "assistant" and u.index < call.message_index)
        for payment_id in _charged_ids(call):
            method = methods.get(payment_id)
            if method is None or _named(agent, payment_id, method) or payment_id in _original(ev, call):
                continue
            if any(_source(w) == method.get("source") for w in wished):
                continue  # the method the user wanted
            described = str(method.get("source", "")).replace("_", " ") + (f" ending in {method['last_four']}" if method.get("last_four") else "")
            ev.add(CALLS, LACKING, f"{call.name} charged {payment_id} ({described}), a method neither the user nor the agent had named; the "
                                   f"profile holds {len(methods)}", rule="payment_nobody_named", at=call.message_index,
                   values={"payment_id": payment_id, "method": described, "methods": sorted(methods)}, confidence=TEXT)  # fmt: skip
            return


def _separate_reservations_refused(ev: Evidence) -> None:
    for utterance in ev.said:
        if utterance.role != "assistant":
            continue
        asked = [u for u in ev.said if u.role == "user" and u.index < utterance.index][-1:]
        if not asked or not _SEPARATE.search(asked[0].text):
            continue
        for sentence in sentences(utterance.text):
            if _SEPARATE.search(sentence) and _REFUSE.search(sentence) and re.search(r"polic|allow|permit|rule", sentence, re.IGNORECASE):
                ev.add(POLICY, LACKING, "refused the user's plan of separate reservations as against the policy; the policy limits travel "
                                        "certificates per reservation, not reservations per user", rule="separate_reservations_refused",
                       at=utterance.index, values={"asked": asked[0].text[:160], "refusal": sentence[:160]}, confidence=TEXT)  # fmt: skip
                return


_CHEAPEST = re.compile(r"\b(cheapest|lowest (price|fare|cost)|least expensive)\b", re.IGNORECASE)
_OTHER_WISH = re.compile(r"\b(after|before|between|by)\s+\d|\b(nonstop|non-stop|direct|fastest|shortest|earliest|latest|morning|evening|afternoon|night)\b|"
                         r"\bsecond\b", re.IGNORECASE)


def _options(call: AgentCall, cabin: str) -> list[tuple[int, tuple[str, ...]]]:
    """(price, flight numbers) of every itinerary a search returned with a seat in the cabin."""
    try:
        found = json.loads(call.result or "")
    except ValueError:
        return []
    out = []
    for option in found if isinstance(found, list) else []:
        legs = option if isinstance(option, list) else [option]
        if not legs or not all(isinstance(f, dict) and isinstance((f.get("prices") or {}).get(cabin), (int, float)) for f in legs):
            continue
        if any(((f.get("available_seats") or {}).get(cabin) or 0) <= 0 for f in legs):
            continue
        out.append((int(sum(f["prices"][cabin] for f in legs)), tuple(str(f.get("flight_number")) for f in legs)))
    return out


def _not_the_cheapest(ev: Evidence) -> None:
    """Asked for the cheapest itinerary (and nothing else that could rule one out), the agent chose one its own
    searches of that route and date showed a cheaper one to."""
    for call in ev.calls:
        if call.name not in ("book_reservation", "update_reservation_flights") or call.error or not isinstance(call.arguments, dict):
            continue
        users = ev.user_text_before(call.message_index)
        cabin = str(call.arguments.get("cabin") or "")
        chosen = {str(f.get("flight_number")) for f in call.arguments.get("flights") or [] if isinstance(f, dict)}
        if not _CHEAPEST.search(users) or _OTHER_WISH.search(users) or not cabin or any(f in users for f in chosen):
            continue
        searches = [c for c in ev.calls if c.name in ("search_direct_flight", "search_onestop_flight") and c.message_index < call.message_index]
        routes: dict[tuple[str, ...], list[tuple[int, tuple[str, ...]]]] = {}
        for search in searches:
            args = search.arguments or {}
            routes.setdefault((str(args.get("origin")), str(args.get("destination")), str(args.get("date"))), []).extend(_options(search, cabin))
        for route, options in routes.items():
            picked = [o for o in options if set(o[1]) <= chosen]
            if not picked or not options:
                continue
            price, flights = min(picked)
            best = min(options)
            if best[0] < price:
                ev.add(DATA, LACKING, f"asked for the cheapest, chose {'+'.join(flights)} (${price}) where its search of {route[0]}-{route[1]} on "
                                      f"{route[2]} showed {'+'.join(best[1])} (${best[0]}) in {cabin}", rule="not_the_cheapest", at=call.message_index,
                       values={"route": list(route), "chosen": list(flights), "price": price, "cheapest": list(best[1]), "cheapest_price": best[0]},
                       confidence=TEXT)  # fmt: skip
                return


def judge(ev: Evidence) -> None:
    if ev.domain != "airline":
        return
    _bags_declined(ev)
    _payment_nobody_named(ev)
    _separate_reservations_refused(ev)
    _not_the_cheapest(ev)
