"""τ² airline refusals judged against the policy, on the records the agent had read when it refused.

Refusing what the policy allows is a policy_application failure (a cancellation with a ground, a cabin
change before any flight has flown, adding bags); a refusal that rests on a misread date or cabin is
datetime_reasoning or structured_data_reasoning. Only refusals that name their reservation (or whose message
leaves exactly one candidate) are judged, and only on the reason they give.
"""

from __future__ import annotations

import re
from typing import Any

from trace_env.kits import tau2_airline as kit

from factory.analyze.conversation import BEYOND_24H, FLOWN_WORDS, ids_in, reason_category
from factory.analyze.evidence import LACKING, PRESENT, TEXT, Evidence
from factory.analyze.world import World

POLICY, DATA, DATE = "policy_application", "structured_data_reasoning", "datetime_reasoning"
_FLIGHT = re.compile(r"^HAT\d{3}$")
_CABIN_REASON = re.compile(r"\b(basic economy|business (class|cabin|fare|ticket|reservation)|(is|in|an?) (economy|business))\b", re.IGNORECASE)
_OTHER_REASON = re.compile(r"\b(seat|availab|sold out|no (direct |nonstop )?flights?|origin|destination|trip type|balance|payment|"
                           r"one passenger|only (one|some)|just (one|me|myself|the)|each passenger|all passengers|same cabin|separate|individual|outbound|"
                           r"return flight|segment|one flight)", re.IGNORECASE)


def res_values(res: dict[str, Any], now: str) -> dict[str, Any]:
    """A reservation's facts a cancellation decision rests on, for a finding's evidence."""
    return {"reservation": res.get("reservation_id"), "cabin": res.get("cabin"), "insurance": res.get("insurance"),
            "created_at": res.get("created_at"), "now": now}  # fmt: skip


def segments(res: dict[str, Any]) -> str:
    return ", ".join(f"{s.get('flight_number')} {s.get('date')}" for s in res.get("flights", []))


def targets(sentence: str, text: str, world: World) -> list[dict[str, Any]]:
    """The reservations a refusal is about: those it names; else the only one its message names; else the only
    one the agent has read. Anything vaguer ("these reservations") is not judged."""
    ids = [i for i in sorted(ids_in(sentence), key=sentence.find) if i in world.reservations]
    if not ids:
        known = {r for u in world.users.values() for r in u.get("reservations") or []} | set(world.reservations)
        named = [i for i in sorted(ids_in(text), key=text.find) if (i in known or any(c.isdigit() for c in i)) and i not in world.flights and not _FLIGHT.match(i)]
        if len(named) == 1 and named[0] in world.reservations:
            ids = named
        elif not named and len(world.reservations) == 1:
            ids = list(world.reservations)
    return [world.reservations[i] for i in ids]


def _refused_cancel(ev: Evidence, index: int, sentence: str, res: dict[str, Any], world: World) -> None:
    rid = res["reservation_id"]
    check = kit.cancellation_check(res, world.flights, world.now, reason_category(ev.user_text_before(index)))
    facts = {**res_values(res, world.now), "refusal": sentence[:160]}
    if check.flown:
        ev.add(POLICY, PRESENT, f"declined to cancel {rid}, which had flown")
        return
    grounds = check.grounds
    flown_claim = {"rule": "flown_misjudged", "at": index, "values": {**facts, "flights": segments(res)}, "confidence": TEXT}
    if not grounds:
        if FLOWN_WORDS.search(sentence):
            ev.add(DATE, LACKING, f"said {rid} had flown, but its flights ({segments(res)}) are not before {world.now[:10]}", **flown_claim)
        else:
            ev.add(POLICY, PRESENT, f"declined to cancel {rid}, which no ground allows")
            if BEYOND_24H.search(sentence):
                ev.add(DATE, PRESENT, f"{rid} was booked more than 24 hours before {world.now}")
        return
    whole = next((u.text for u in ev.said if u.index == index), sentence)  # the 24-hour claim may sit in another sentence
    if "recent_booking" in grounds and (BEYOND_24H.search(sentence) or BEYOND_24H.search(whole)):
        ev.add(DATE, LACKING, f"refused to cancel {rid} as booked over 24 hours ago, but it was booked {res.get('created_at')}, within 24 h of {world.now}",
               rule="24h_window_misjudged", at=index, values=facts, confidence=TEXT)  # fmt: skip
    elif FLOWN_WORDS.search(sentence):
        ev.add(DATE, LACKING, f"said {rid} had flown, but its flights ({segments(res)}) are not before {world.now[:10]}", **flown_claim)
    else:
        ev.add(POLICY, LACKING, f"refused to cancel {rid} although the policy allows it ({', '.join(grounds)})", rule="allowed_cancel_refused",
               at=index, values={**facts, "grounds": grounds}, confidence=TEXT)  # fmt: skip


def _cited_cabin(sentence: str) -> str | None:
    """The cabin a refusal gives as its reason (the most specific one named)."""
    match = _CABIN_REASON.search(sentence)
    if not match:
        return None
    text = match.group(0).lower()
    return "basic_economy" if "basic" in text else "business" if "business" in text else "economy"


def _refused_cabin(ev: Evidence, index: int, sentence: str, res: dict[str, Any], world: World) -> None:
    """Only a refusal that cites the reservation's cabin is judged: other reasons (one passenger only, seats,
    budget) may be right and are not what the records decide, nor is one to a user who asked for new flights too
    (those the policy may forbid)."""
    rid = res["reservation_id"]
    if kit.cabin_change_problems(res, world.flights):
        ev.add(POLICY, PRESENT, f"declined a cabin change on {rid}, which had flown")
    elif _cited_cabin(sentence) == res.get("cabin") and not _OTHER_REASON.search(sentence) and not _ASKS_FLIGHTS.search(ev.user_text_before(index)):
        ev.add(POLICY, LACKING, f"refused a cabin change on {rid} because of its cabin ({res.get('cabin')}); the policy allows cabin changes, "
                                "basic economy included, until a flight has flown", rule="allowed_cabin_change_refused", at=index,
               values={"reservation": rid, "cabin": res.get("cabin"), "refusal": sentence[:160]}, confidence=TEXT)  # fmt: skip


_BASIC = r"basic[\s\-\u2010\u2011_]economy"
_BLANKET = re.compile(rf"{_BASIC}[^.]{{0,80}}\b(cannot|can['’]?t|can not|not (be )?(allowed|permitted|possible))\b[^.]{{0,30}}\b(modif|chang|alter|upgrad)"
                      rf"|\b(cannot|can['’]?t|can not)\b[^.]{{0,15}}\b(modif|chang|alter)\w*[^.]{{0,60}}{_BASIC}", re.IGNORECASE)
_ASKS_FLIGHTS = re.compile(r"\b(cheapest|nonstop|non-stop|direct|different|another|earlier|later|next day)\b[^.]{0,30}\b(flights?|trip|itinerary|round trip|date)|"
                           r"\bnew (flights?|itinerary|trip|dates?)\b|"
                           r"\b(change|move|switch|push)\b[^.]{0,30}\b(flights?|dates?|itinerary)\b", re.IGNORECASE)
_ASKS_CABIN = re.compile(r"\bupgrad\w*|\b(to|in) (regular |standard )?economy( class)?\b|\bbusiness class\b|\b(change|switch)\b[^.]{0,20}\b(cabin|class)\b", re.IGNORECASE)


def _blanket_basic_economy_refusal(ev: Evidence) -> None:
    """"Basic economy cannot be modified", said to a user who asked for a cabin change: the policy forbids
    changing a basic economy trip's flights, not its cabin, so a cabin change refused that way (and never made)
    is policy_application."""
    for utterance in ev.said:
        if utterance.role != "assistant":
            continue
        match = next((m for m in _BLANKET.finditer(utterance.text)), None)
        asked = ev.user_text_before(utterance.index)
        if match is None or not _ASKS_CABIN.search(asked) or _ASKS_FLIGHTS.search(asked):
            continue
        world = ev.world_before(utterance.index)
        basic = [r for r in targets(match.group(0), utterance.text, world) if r.get("cabin") == "basic_economy"]
        basic = basic or [r for r in world.reservations.values() if r.get("cabin") == "basic_economy" and r["reservation_id"] in utterance.text]
        for res in basic[:1]:
            rid = res["reservation_id"]
            if any(c.name == "update_reservation_flights" and (c.arguments or {}).get("reservation_id") == rid for c in ev.later_writes(utterance.index)):
                continue
            ev.add(POLICY, LACKING, f"told the user basic economy reservation {rid} cannot be modified when asked for a cabin change; the policy "
                                    "allows cabin changes, basic economy included, until a flight has flown", rule="basic_economy_cabin_change_refused",
                   at=utterance.index, values={"reservation": rid, "cabin": res.get("cabin"), "refusal": match.group(0)[:160]}, confidence=TEXT)  # fmt: skip
            return


def judge(ev: Evidence) -> None:
    _blanket_basic_economy_refusal(ev)
    judged: set[tuple[str, str]] = set()
    for utterance, world, action, sentence in ev.refusals():
        for res in targets(sentence, utterance.text, world):
            rid = res["reservation_id"]
            if (action, rid) in judged:
                continue
            judged.add((action, rid))
            later = [c for c in ev.later_writes(utterance.index) if (c.arguments or {}).get("reservation_id") == rid]
            refusal = {"at": utterance.index, "confidence": TEXT}
            if action == "cancel" and not any(c.name == "cancel_reservation" for c in later):
                _refused_cancel(ev, utterance.index, sentence, res, world)
            elif action == "change_cabin" and not any(c.name == "update_reservation_flights" for c in later):
                _refused_cabin(ev, utterance.index, sentence, res, world)
            elif action == "change_flights" and re.search(r"basic economy", sentence, re.I) and not later:
                if res.get("cabin") == "basic_economy":
                    ev.add(POLICY, PRESENT, f"declined to change the flights of basic economy reservation {rid}")
                else:
                    ev.add(DATA, LACKING, f"called {rid} basic economy, but its cabin is {res.get('cabin')}", rule="cabin_misread",
                           values={"reservation": rid, "cabin": res.get("cabin"), "refusal": sentence[:160]}, **refusal)  # fmt: skip
            elif action == "add_bags" and not re.search(r"remov|fewer|reduce", sentence, re.I) and not _OTHER_REASON.search(sentence) and not later:
                ev.add(POLICY, LACKING, f"refused to add checked bags to {rid}, which the policy always allows", rule="adding_bags_refused",
                       values={"reservation": rid, "refusal": sentence[:160]}, **refusal)  # fmt: skip
