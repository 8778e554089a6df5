"""Calendar facts and date wording for the ToolSandbox phone, whose clock and time tools run in UTC.

US federal holidays are computed by rule for any year (the holiday itself, not the observed day off), as
ToolSandbox's ``search_holiday`` finds them with the ``holidays`` package. ``mentions_date`` and friends read
an agent's message for a date, a clock time or a duration, so rewards grade what the user was told.
"""

from __future__ import annotations

import datetime
import re

from trace_env.kits.text import words
from trace_env.sdk import negated

__all__ = [
    "HOLIDAY_ALIASES",
    "MONTHS",
    "UTC",
    "WEEKDAYS",
    "at",
    "date_of",
    "durations",
    "find_holiday",
    "mentions_date",
    "mentions_time",
    "midnight",
    "moment_of",
    "nth_weekday",
    "say_date",
    "us_holidays",
]

UTC = datetime.timezone.utc
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
#: Words a holiday query may contain -> the canonical name in :func:`us_holidays`.
HOLIDAY_ALIASES = {
    "new year": "New Year's Day", "mlk": "Martin Luther King Jr. Day", "martin luther king": "Martin Luther King Jr. Day",
    "president": "Washington's Birthday", "washington": "Washington's Birthday", "memorial": "Memorial Day",
    "juneteenth": "Juneteenth National Independence Day", "independence day": "Independence Day",
    "fourth of july": "Independence Day", "4th of july": "Independence Day", "july 4": "Independence Day",
    "labor day": "Labor Day", "labour day": "Labor Day", "columbus": "Columbus Day",
    "indigenous peoples": "Columbus Day", "veteran": "Veterans Day", "thanksgiving": "Thanksgiving",
    "christmas": "Christmas Day", "xmas": "Christmas Day",
}


def nth_weekday(year: int, month: int, weekday: int, n: int) -> datetime.date:
    """The n-th given weekday (Monday = 0) of a month; ``n = -1`` is the last one."""
    if n > 0:
        first = datetime.date(year, month, 1)
        return first + datetime.timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))
    last = datetime.date(year + (month == 12), month % 12 + 1, 1) - datetime.timedelta(days=1)
    return last - datetime.timedelta(days=(last.weekday() - weekday) % 7)


def us_holidays(year: int) -> dict[str, datetime.date]:
    """US federal holidays of a year by rule."""
    return {
        "New Year's Day": datetime.date(year, 1, 1),
        "Martin Luther King Jr. Day": nth_weekday(year, 1, 0, 3),  # third Monday of January
        "Washington's Birthday": nth_weekday(year, 2, 0, 3),  # third Monday of February
        "Memorial Day": nth_weekday(year, 5, 0, -1),  # last Monday of May
        "Juneteenth National Independence Day": datetime.date(year, 6, 19),
        "Independence Day": datetime.date(year, 7, 4),
        "Labor Day": nth_weekday(year, 9, 0, 1),  # first Monday of September
        "Columbus Day": nth_weekday(year, 10, 0, 2),  # second Monday of October
        "Veterans Day": datetime.date(year, 11, 11),
        "Thanksgiving": nth_weekday(year, 11, 3, 4),  # fourth Thursday of November
        "Christmas Day": datetime.date(year, 12, 25),
    }


def find_holiday(name: str) -> str | None:
    """The canonical holiday a query names (``"MLK day"`` -> ``"Martin Luther King Jr. Day"``), or None."""
    text = " ".join(words(name))
    for alias, canonical in HOLIDAY_ALIASES.items():
        if alias in text:
            return canonical
    return None


def midnight(day: datetime.date) -> float:
    """POSIX timestamp of a day's start, UTC."""
    return datetime.datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def at(day: datetime.date, hour: int, minute: int) -> float:
    """POSIX timestamp of a clock time on a day, UTC."""
    return datetime.datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC).timestamp()


def moment_of(timestamp: float) -> datetime.datetime:
    """The UTC date and time of a POSIX timestamp (a pure conversion: env code may not call
    ``fromtimestamp`` itself, which the static check cannot tell apart from reading the local clock)."""
    return datetime.datetime.fromtimestamp(timestamp, UTC)


def date_of(timestamp: float) -> datetime.date:
    """The UTC calendar day of a POSIX timestamp."""
    return moment_of(timestamp).date()


def say_date(day: datetime.date) -> str:
    """``Friday, June 7, 2030``."""
    return f"{WEEKDAYS[day.weekday()]}, {MONTHS[day.month - 1]} {day.day}, {day.year}"


def mentions_date(text: str, day: datetime.date) -> bool:
    """Whether ``text`` names this calendar day (month name and day, ISO, or US numeric form). When the text
    also names a year, it must be the right one ("June 3, 2024" does not count for 2029); a negated mention
    ("it isn't June 3") does not count."""
    low = text.lower()
    month = MONTHS[day.month - 1].lower()
    d = day.day
    patterns = (
        rf"\b{month[:3]}[a-z]*\.?\s+0?{d}(?:st|nd|rd|th)?\b",
        rf"\b0?{d}(?:st|nd|rd|th)?\s+(?:of\s+)?{month[:3]}",
        rf"\b{day.year}-{day.month:02d}-{d:02d}\b",
        rf"\b0?{day.month}/0?{d}(?:/(?:{day.year}|{day.year % 100:02d}))?\b",
    )
    if not any(not negated(low, m.start()) for p in patterns for m in re.finditer(p, low)):
        return False
    years = {int(y) for y in re.findall(r"(?<![$\d,.])\b([12]\d{3}|[3-9]\d{3})\b(?![,.]?\d)", low)}
    return not years or day.year in years


def mentions_time(text: str, hour: int, minute: int) -> bool:
    """Whether ``text`` names this clock time (``17:00``, ``5pm``, ``5:00 PM``, ``noon``)."""
    low = text.lower()
    h12, suffix = (hour % 12 or 12), ("a" if hour < 12 else "p")
    patterns = [rf"\b0?{hour}:{minute:02d}\b", rf"\b{h12}(?::{minute:02d})?\s*{suffix}\.?m\b"]
    if minute == 0:
        patterns.append(rf"\b{h12}\s*o'clock")
    if (hour, minute) == (12, 0):
        patterns.append(r"\bnoon\b")
    return any(re.search(p, low) for p in patterns)


def durations(text: str, unit: str) -> set[int]:
    """Numbers written before a unit word: ``durations("4 hours 7 minutes", "hour") == {4}``; a negated one
    ("not 4 hours") does not count."""
    forms = {"day": r"days?", "hour": r"(?:hours?|hrs?|h)", "minute": r"(?:minutes?|mins?|m)"}[unit]
    low = text.lower()
    return {int(m.group(1).replace(",", "")) for m in re.finditer(rf"\b(\d[\d,]*)\s*{forms}\b", low) if not negated(low, m.start())}
