"""Dates against the scenario's "now" and the user's relative dates (datetime_reasoning, τ² airline).

- A flight change the user asked to move by a number of days ("the day after my reservation", "delay it by
  one day", "push it out two days") must move some changed flight by exactly that many days from the dates of
  the reservation the agent had read.
- No flight is booked or put on a reservation for a date before the policy's current day (flown segments a
  change keeps are not new). Searches are not judged: looking up a past flight (a delay complaint, a duration)
  is legitimate.
"""

from __future__ import annotations

import datetime as dt
import re

from factory.analyze.evidence import LACKING, PRESENT, TEXT, Evidence

CAP = "datetime_reasoning"
_N = r"(one|a|1|two|2|three|3|four|4|five|5)"
_VALUES = {"one": 1, "a": 1, "1": 1, "two": 2, "2": 2, "three": 3, "3": 3, "four": 4, "4": 4, "five": 5, "5": 5}
_LATER = re.compile(rf"\b(?:the )?(day after|next day|following day)\b|\b{_N} days? (?:later|after|out)\b|\b(?:by|out|back) {_N} days?\b", re.I)
_EARLIER = re.compile(rf"\b(?:the )?(day before|previous day)\b|\b{_N} days? (?:earlier|before)\b", re.I)
_FLIGHT_WRITES = ("update_reservation_flights", "book_reservation")


def _offset(text: str) -> int | None:
    """The shift in days the user's words ask for: +1 for "the day after", -2 for "two days earlier"."""
    for pattern, sign in ((_LATER, 1), (_EARLIER, -1)):
        match = pattern.search(text)
        if match:
            words = [g for g in match.groups() if g]
            count = next((_VALUES[w.lower()] for w in words if w.lower() in _VALUES), 1)
            return sign * count
    return None


def _day(text: object) -> dt.date | None:
    try:
        return dt.date.fromisoformat(str(text))
    except ValueError:
        return None


def _shift(ev: Evidence) -> None:
    for call in ev.calls:
        if call.name != "update_reservation_flights" or call.arguments is None:
            continue
        asked = [u for u in ev.said if u.role == "user" and u.index < call.message_index and _offset(u.text) is not None]
        res = ev.world_before(call.message_index).reservations.get(str(call.arguments.get("reservation_id")))
        if not asked or res is None:
            continue
        offset = _offset(asked[-1].text)
        old = {(s.get("flight_number"), s.get("date")) for s in res.get("flights", [])}
        old_days = [d for d in (_day(s.get("date")) for s in res.get("flights", [])) if d]
        changed = [f for f in call.arguments.get("flights") or [] if isinstance(f, dict) and (f.get("flight_number"), f.get("date")) not in old]
        new_days = [d for d in (_day(f.get("date")) for f in changed) if d]
        if not new_days or not old_days:
            continue
        shifts = sorted({(n - o).days for n in new_days for o in old_days})
        if offset in shifts:
            ev.add(CAP, PRESENT, f"moved the flights by {offset} day(s) as asked", rule="date_shift_right")
            continue
        ev.add(CAP, LACKING, f"the user asked to move the trip by {offset} day(s); the changed flights on {', '.join(str(d) for d in new_days)} are "
                             f"{', '.join(str(s) for s in shifts)} day(s) from the reservation's {', '.join(sorted({str(d) for d in old_days}))}",
               rule="date_shift_wrong", at=call.message_index,
               values={"asked": asked[-1].text[:120], "asked_shift_days": offset, "old_dates": sorted({str(d) for d in old_days}),
                       "new_dates": [str(d) for d in new_days]}, confidence=TEXT)  # fmt: skip
        return


def _past(ev: Evidence) -> None:
    today = _day(ev.now[:10])
    if today is None:
        return
    for call in ev.calls:
        args = call.arguments or {}
        if call.name in _FLIGHT_WRITES:
            res = ev.world_before(call.message_index).reservations.get(str(args.get("reservation_id")))
            kept = {(s.get("flight_number"), s.get("date")) for s in (res or {}).get("flights", [])}
            days = [f.get("date") for f in args.get("flights") or [] if isinstance(f, dict) and (f.get("flight_number"), f.get("date")) not in kept]
        else:
            continue
        past = [d for d in (_day(x) for x in days) if d and d < today]
        if past:
            ev.add(CAP, LACKING, f"{call.name} for {past[0]}, a date already past (now is {ev.now[:10]})", rule="date_in_the_past",
                   at=call.message_index, values={"date": str(past[0]), "now": ev.now}, confidence=TEXT)  # fmt: skip
            return


def judge(ev: Evidence) -> None:
    if ev.domain != "airline":
        return
    _shift(ev)
    _past(ev)
