"""Blueprint: date and time reasoning with the device clock and the timestamp tools (target: ToolSandbox).

The user speaks in relative terms - "next Friday at 9am", "in 3 days at 5pm", "two weeks from today",
"the day before Thanksgiving this year", "how many days until Labor Day?", "how long until my dentist
reminder goes off?" - and the right answer depends on a moment the agent cannot know without asking the
phone: the scenario's current time is random (any year from 2025 to 2031, any month, weekday and hour),
it is returned only by ``get_current_timestamp``, and the system prompt never states it.

An agent with the capability reads the clock, does the arithmetic with the timestamp tools
(``timestamp_to_datetime_info``, ``datetime_info_to_timestamp``, ``shift_timestamp``, ``timestamp_diff``,
``seconds_to_hours_minutes_seconds``, ``search_holiday``), writes the exact timestamp and tells the user the
date. An agent without it assumes a "today" (for instance the date its training data ends) or slips a day,
and gets the date wrong. The reward gives partial credit for near misses (right day, wrong hour; one day
off) so attempts at different levels of care score differently.

All times are UTC: the device clock, every timestamp tool and the scenario's truth.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import re

from env_registry import sdk

UTC = datetime.timezone.utc

# What an agent that never checks the clock believes "now" is: a plausible training-cutoff date.
# Scenario clocks start in 2025, so this belief is always wrong, as it is for a deployed model.
STALE_NOW = datetime.datetime(2024, 6, 13, 9, 0, tzinfo=UTC)

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")

REMINDER_TASKS = (
    "call the insurance company", "submit the expense report", "pick up the cake", "book a haircut",
    "renew the parking permit", "send the invoice to Dana", "water the garden", "pay the credit card bill",
    "buy a gift for Sam", "check in for the flight", "take the car for an oil change", "call grandma",
    "bring the projector to work", "order more coffee beans", "drop the keys at the front desk",
)
OLD_REMINDERS = (
    "Dentist appointment", "Team standup notes", "Return the rental skis", "Pharmacy pickup", "Gym class",
    "Pay the water bill", "Vet appointment for Biscuit", "Parent-teacher meeting", "Pick up dry cleaning",
)
CLOCK_TIMES = ((7, 0), (8, 0), (8, 30), (9, 0), (10, 0), (11, 15), (12, 0), (13, 30), (14, 0), (15, 0),
               (16, 45), (17, 0), (18, 30), (19, 0), (20, 0), (21, 0))

# Variant -> weight. The first four create a reminder; the last three are questions.
VARIANTS = {
    "weekday_reminder": 2.5,
    "days_offset_reminder": 2.0,
    "weeks_offset_reminder": 1.5,
    "holiday_reminder": 2.0,
    "days_until_holiday": 1.5,
    "time_until_reminder": 1.5,
    "date_in_n_days": 1.0,
}
HOLIDAY_SPOKEN = {  # canonical name -> how a user says it
    "New Year's Day": "New Year's Day", "Martin Luther King Jr. Day": "MLK Day",
    "Washington's Birthday": "Presidents' Day", "Memorial Day": "Memorial Day",
    "Juneteenth National Independence Day": "Juneteenth", "Independence Day": "the Fourth of July",
    "Labor Day": "Labor Day", "Columbus Day": "Columbus Day", "Veterans Day": "Veterans Day",
    "Thanksgiving": "Thanksgiving", "Christmas Day": "Christmas",
}
HOLIDAY_OFFSETS = {-2: "two days before {h}", -1: "the day before {h}", 0: "on {h}", 1: "the day after {h}"}


# --------------------------------------------------------------------------------------------------
# Calendar helpers (stdlib only; US holidays computed by rule for any year)
# --------------------------------------------------------------------------------------------------

def _nth_weekday(year: int, month: int, weekday: int, n: int) -> datetime.date:
    """The n-th given weekday (Mon=0) of a month; n=-1 is the last one."""
    if n > 0:
        first = datetime.date(year, month, 1)
        return first + datetime.timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))
    last = datetime.date(year + (month == 12), month % 12 + 1, 1) - datetime.timedelta(days=1)
    return last - datetime.timedelta(days=(last.weekday() - weekday) % 7)


def us_holidays(year: int) -> dict[str, datetime.date]:
    """US federal holidays of a year by rule (the holiday itself, not the observed day off)."""
    return {
        "New Year's Day": datetime.date(year, 1, 1),
        "Martin Luther King Jr. Day": _nth_weekday(year, 1, 0, 3),  # third Monday of January
        "Washington's Birthday": _nth_weekday(year, 2, 0, 3),  # third Monday of February
        "Memorial Day": _nth_weekday(year, 5, 0, -1),  # last Monday of May
        "Juneteenth National Independence Day": datetime.date(year, 6, 19),
        "Independence Day": datetime.date(year, 7, 4),
        "Labor Day": _nth_weekday(year, 9, 0, 1),  # first Monday of September
        "Columbus Day": _nth_weekday(year, 10, 0, 2),  # second Monday of October
        "Veterans Day": datetime.date(year, 11, 11),
        "Thanksgiving": _nth_weekday(year, 11, 3, 4),  # fourth Thursday of November
        "Christmas Day": datetime.date(year, 12, 25),
    }


HOLIDAY_ALIASES = {  # words a query may contain -> canonical name
    "new year": "New Year's Day", "mlk": "Martin Luther King Jr. Day", "martin luther king": "Martin Luther King Jr. Day",
    "president": "Washington's Birthday", "washington": "Washington's Birthday", "memorial": "Memorial Day",
    "juneteenth": "Juneteenth National Independence Day", "independence day": "Independence Day",
    "fourth of july": "Independence Day", "4th of july": "Independence Day", "july 4": "Independence Day",
    "labor day": "Labor Day", "labour day": "Labor Day", "columbus": "Columbus Day",
    "indigenous peoples": "Columbus Day", "veteran": "Veterans Day", "thanksgiving": "Thanksgiving",
    "christmas": "Christmas Day", "xmas": "Christmas Day",
}


def _words(text) -> list[str]:
    return re.sub(r"[^a-z0-9]+", " ", str(text).lower()).split()


def find_holiday(name: str) -> str | None:
    text = " ".join(_words(name))
    for alias, canonical in HOLIDAY_ALIASES.items():
        if alias in text:
            return canonical
    return None


def _midnight(day: datetime.date) -> float:
    return datetime.datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def _at(day: datetime.date, hour: int, minute: int) -> float:
    return datetime.datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC).timestamp()


def _date_of(timestamp: float) -> datetime.date:
    return datetime.datetime.fromtimestamp(timestamp, UTC).date()


def _spoken_time(rng, hour: int, minute: int) -> str:
    """A clock time as a user might type it: 9am, 9:00 AM, 17:00, noon."""
    if (hour, minute) == (12, 0) and rng.random() < 0.5:
        return "noon"
    h12, suffix = (hour % 12 or 12), ("am" if hour < 12 else "pm")
    style = rng.randrange(3)
    if style == 0:
        return f"{h12}{suffix}" if minute == 0 else f"{h12}:{minute:02d}{suffix}"
    if style == 1:
        return f"{h12}:{minute:02d} {suffix.upper()}"
    return f"{hour:02d}:{minute:02d}"


def _say_date(day: datetime.date) -> str:
    return f"{WEEKDAYS[day.weekday()]}, {MONTHS[day.month - 1]} {day.day}, {day.year}"


def mentions_date(text: str, day: datetime.date) -> bool:
    """Whether ``text`` names this calendar day (month name + day, ISO, or US numeric form).

    When the text also names a year, that year must be the right one (stops "June 3, 2024" counting for 2029).
    """
    low = text.lower()
    month = MONTHS[day.month - 1].lower()
    d = day.day
    patterns = (
        rf"\b{month[:3]}[a-z]*\.?\s+0?{d}(?:st|nd|rd|th)?\b",
        rf"\b0?{d}(?:st|nd|rd|th)?\s+(?:of\s+)?{month[:3]}",
        rf"\b{day.year}-{day.month:02d}-{d:02d}\b",
        rf"\b0?{day.month}/0?{d}(?:/(?:{day.year}|{day.year % 100:02d}))?\b",
    )
    if not any(re.search(p, low) for p in patterns):
        return False
    years = {int(y) for y in re.findall(r"\b(20\d\d)\b", low)}
    return not years or day.year in years


def mentions_time(text: str, hour: int, minute: int) -> bool:
    """Whether ``text`` names this clock time (17:00, 5pm, 5:00 PM, noon)."""
    low = text.lower()
    h12, suffix = (hour % 12 or 12), ("a" if hour < 12 else "p")
    patterns = [rf"\b0?{hour}:{minute:02d}\b", rf"\b{h12}(?::{minute:02d})?\s*{suffix}\.?m\b"]
    if minute == 0:
        patterns.append(rf"\b{h12}\s*o'clock")
    if (hour, minute) == (12, 0):
        patterns.append(r"\bnoon\b")
    return any(re.search(p, low) for p in patterns)


def _durations(text: str, unit: str) -> set[int]:
    """Numbers written before a unit word: _durations("4 hours 7 minutes", "hour") -> {4}."""
    forms = {"day": r"days?", "hour": r"(?:hours?|hrs?|h)", "minute": r"(?:minutes?|mins?|m)"}[unit]
    return {int(n.replace(",", "")) for n in re.findall(rf"\b(\d[\d,]*)\s*{forms}\b", text.lower())}


def _check_timestamp(value: float, name: str) -> datetime.datetime:
    if not math.isfinite(value):
        raise sdk.ToolError(f"{name} must be a finite POSIX timestamp", exception="ValueError")
    try:
        return datetime.datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        raise sdk.ToolError(f"{name}={value} is outside the supported date range", exception="ValueError") from None


def _uuid(rng) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def _stable_uuid(*parts) -> str:
    h = hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def _overlap(expected, actual) -> float:
    want, have = _words(expected), set(_words(actual))
    return sum(w in have for w in want) / len(want) if want else 0.0


# A small unit table for the unit_conversion distractor: unit -> (dimension, factor to the base unit).
UNITS = {
    "meter": ("length", 1.0), "kilometer": ("length", 1000.0), "centimeter": ("length", 0.01),
    "millimeter": ("length", 0.001), "mile": ("length", 1609.344), "yard": ("length", 0.9144),
    "foot": ("length", 0.3048), "inch": ("length", 0.0254),
    "kilogram": ("mass", 1.0), "gram": ("mass", 0.001), "pound": ("mass", 0.45359237), "ounce": ("mass", 0.028349523125),
    "liter": ("volume", 1.0), "milliliter": ("volume", 0.001), "gallon": ("volume", 3.785411784),
    "quart": ("volume", 0.946352946), "cup": ("volume", 0.2365882365),
    "second": ("time", 1.0), "minute": ("time", 60.0), "hour": ("time", 3600.0), "day": ("time", 86400.0),
    "week": ("time", 604800.0),
}
UNIT_ALIASES = {"metre": "meter", "km": "kilometer", "cm": "centimeter", "mm": "millimeter", "m": "meter",
                "mi": "mile", "ft": "foot", "feet": "foot", "in": "inch", "inches": "inch", "kg": "kilogram",
                "g": "gram", "lb": "pound", "lbs": "pound", "oz": "ounce", "litre": "liter", "l": "liter",
                "ml": "milliliter", "gal": "gallon", "s": "second", "sec": "second", "min": "minute", "h": "hour",
                "hr": "hour", "c": "celsius", "f": "fahrenheit", "k": "kelvin"}


def _unit(name: str) -> str:
    key = name.strip().lower().replace("degrees ", "").replace("degree ", "")
    key = UNIT_ALIASES.get(key, key)
    if key not in UNITS and key not in ("celsius", "fahrenheit", "kelvin") and key.endswith("s"):
        key = UNIT_ALIASES.get(key[:-1], key[:-1])
    if key not in UNITS and key not in ("celsius", "fahrenheit", "kelvin"):
        raise sdk.ToolError(f"'{name}' is not defined in the unit registry", exception="UndefinedUnitError")
    return key


# --------------------------------------------------------------------------------------------------
# The env
# --------------------------------------------------------------------------------------------------

class DatetimeReasoningEnv(sdk.TaskEnv):
    capability = "datetime_reasoning"
    target = "toolsandbox"
    description = (
        "Date and time reasoning grounded in the device clock. The user asks for a reminder at a relative time "
        "(next Friday at 9am, in 3 days at 5pm, two weeks from today, the day before Thanksgiving this year) or "
        "asks a time question (days until a holiday, hours and minutes until a reminder fires, the date N days "
        "from today). The current moment is random per scenario and only get_current_timestamp reveals it; the "
        "agent must read it and compute with the timestamp tools. Graded on the exact timestamp or answer, with "
        "partial credit for near misses, on stating the date, and on checking the clock before committing."
    )
    tool_names = [
        "get_current_timestamp",
        "timestamp_to_datetime_info",
        "datetime_info_to_timestamp",
        "shift_timestamp",
        "timestamp_diff",
        "seconds_to_hours_minutes_seconds",
        "search_holiday",
        "add_reminder",
        "search_reminder",
        "modify_reminder",
        "remove_reminder",
        "get_wifi_status",
        "unit_conversion",
    ]
    write_tools = frozenset({"add_reminder", "modify_reminder", "remove_reminder"})
    max_steps = 20

    # ---------------------------------------------------------------------------------- scenario
    def generate(self, seed: int) -> sdk.Scenario:
        rng = self.rng(seed)
        # The device clock: any day of 2025-2031 between 06:00 and 23:00 UTC, with sub-second noise.
        day = datetime.date(2025, 1, 1) + datetime.timedelta(days=rng.randrange(7 * 365))
        now = round(_midnight(day) + rng.uniform(6 * 3600, 23 * 3600), 3)
        today = _date_of(now)

        reminders = []
        for text in rng.sample(OLD_REMINDERS, rng.randint(2, 5)):
            reminders.append({
                "reminder_id": _uuid(rng),
                "content": text,
                "creation_timestamp": round(now - rng.uniform(1, 30) * 86400, 3),
                "reminder_timestamp": round(now + rng.uniform(-5, 25) * 86400, 3),
                "latitude": None,
                "longitude": None,
            })

        names = list(VARIANTS)
        variant = rng.choices(names, weights=[VARIANTS[n] for n in names])[0]
        holidays_ahead = self._holidays_ahead(today)
        if variant == "holiday_reminder" and not holidays_ahead:
            variant = "days_offset_reminder"  # late December: nothing left "this year"
        makers = {
            "weekday_reminder": self._make_weekday_reminder,
            "days_offset_reminder": self._make_days_offset_reminder,
            "weeks_offset_reminder": self._make_weeks_offset_reminder,
            "holiday_reminder": self._make_holiday_reminder,
            "days_until_holiday": self._make_days_until_holiday,
            "time_until_reminder": self._make_time_until_reminder,
            "date_in_n_days": self._make_date_in_n_days,
        }
        truth, request = makers[variant](rng, now, today, holidays_ahead, reminders)
        rng.shuffle(reminders)

        state = {
            "current_timestamp": now,
            "timezone": "UTC",
            "settings": {"low_battery_mode": False, "wifi": True, "cellular": True, "location_service": True},
            "reminders": reminders,
        }
        user = {
            "request": request,
            "persona": rng.choice(("organised planner", "busy parent", "student juggling deadlines",
                                   "freelancer who lives by reminders")),
            # The user does not know the timestamp either; asked for the date, they defer to the phone.
            "facts": [
                [["what is today's date", "what's today's date", "what day is it today", "what is the current date",
                  "what's the current date", "what is the date today"],
                 "I'm not sure off the top of my head - can't you check the phone's clock?"],
                [["what should the reminder say", "what would you like the reminder to say"],
                 f"Just call it: {truth.get('content', 'the reminder')}."],
            ],
        }
        return sdk.Scenario(seed=seed, state=state, user=user, truth=truth, meta={"variant": variant})

    @staticmethod
    def _holidays_ahead(today: datetime.date) -> list[tuple[str, datetime.date]]:
        """Holidays still to come this year, at least three days out (so 'two days before' is in the future)."""
        return [(name, day) for name, day in us_holidays(today.year).items() if (day - today).days >= 3]

    # Each _make_* returns (truth, first user message). Reminder truths share one shape.
    def _reminder_truth(self, rng, target: datetime.date, how: str, phrase: str) -> tuple[dict, str]:
        hour, minute = rng.choice(CLOCK_TIMES)
        task = rng.choice(REMINDER_TASKS)
        when = f"{phrase} at {_spoken_time(rng, hour, minute)}"
        request = rng.choice((
            "Remind me to {task} {when}.",
            "Can you set a reminder {when} to {task}?",
            "Please add a reminder: {task}, {when}.",
            "I need a reminder {when} - {task}.",
        )).format(task=task, when=when)
        truth = {
            "kind": "reminder", "how": how, "content": task, "date": target.isoformat(), "hour": hour,
            "minute": minute, "reminder_timestamp": _at(target, hour, minute),
        }
        return truth, request

    def _make_weekday_reminder(self, rng, now, today, holidays_ahead, reminders):
        weekday = rng.randrange(7)
        ahead = (weekday - today.weekday()) % 7 or 7  # the first such day strictly after today
        word = WEEKDAYS[weekday]
        phrase = rng.choice(("next {d}", "this coming {d}", "on {d}")).format(d=word)
        truth, request = self._reminder_truth(rng, today + datetime.timedelta(days=ahead), "weekday", phrase)
        truth["days_ahead"] = ahead
        return truth, request

    def _make_days_offset_reminder(self, rng, now, today, holidays_ahead, reminders):
        n = rng.choice((1, 2, 2, 3, 3, 4, 5, 6, 8, 10))
        phrase = {1: "tomorrow", 2: rng.choice(("the day after tomorrow", "in 2 days"))}.get(
            n, rng.choice((f"in {n} days", f"{NUMBER_WORDS[n]} days from now")))
        truth, request = self._reminder_truth(rng, today + datetime.timedelta(days=n), "days", phrase)
        truth["days_ahead"] = n
        return truth, request

    def _make_weeks_offset_reminder(self, rng, now, today, holidays_ahead, reminders):
        n = rng.choice((1, 2, 2, 3, 4))
        phrase = (rng.choice(("a week from today", "one week from today")) if n == 1
                  else rng.choice((f"{n} weeks from today", f"{NUMBER_WORDS[n]} weeks from today")))
        truth, request = self._reminder_truth(rng, today + datetime.timedelta(weeks=n), "weeks", phrase)
        truth["days_ahead"] = 7 * n
        return truth, request

    def _make_holiday_reminder(self, rng, now, today, holidays_ahead, reminders):
        name, day = rng.choice(holidays_ahead)
        offset = rng.choice(list(HOLIDAY_OFFSETS))
        phrase = HOLIDAY_OFFSETS[offset].format(h=HOLIDAY_SPOKEN[name]) + rng.choice((" this year", ""))
        truth, request = self._reminder_truth(rng, day + datetime.timedelta(days=offset), "holiday", phrase)
        truth.update(holiday=name, holiday_offset=offset)
        return truth, request

    def _make_days_until_holiday(self, rng, now, today, holidays_ahead, reminders):
        # Next year's New Year's Day is always a candidate; search_holiday defaults to the current
        # year, so the agent has to notice that this year's has passed and ask for the next one.
        choices = [(name, day) for name, day in holidays_ahead if name != "New Year's Day"]
        choices.append(("New Year's Day", datetime.date(today.year + 1, 1, 1)))
        name, day = rng.choice(choices)
        request = rng.choice((
            "How many days until {h}?", "How many days are left until {h}?", "How far away is {h}, in days?",
            "Count the days for me: how long until {h}?",
        )).format(h=HOLIDAY_SPOKEN[name])
        truth = {"kind": "days_until", "holiday": name, "date": day.isoformat(), "days": (day - today).days}
        return truth, request

    def _make_time_until_reminder(self, rng, now, today, holidays_ahead, reminders):
        task = rng.choice(REMINDER_TASKS)
        gap = rng.randint(1, 19) * 3600 + rng.randint(0, 59) * 60 + rng.randint(3, 57)
        reminder = {
            "reminder_id": _uuid(rng),
            "content": task[0].upper() + task[1:],
            "creation_timestamp": round(now - rng.uniform(1, 10) * 86400, 3),
            "reminder_timestamp": round(now + gap, 3),
            "latitude": None,
            "longitude": None,
        }
        reminders.append(reminder)
        request = rng.choice((
            "How long until my reminder to {t} goes off? Hours and minutes, please.",
            "How much time do I have before the '{t}' reminder? Give me hours and minutes.",
            "In how many hours and minutes will my {t} reminder fire?",
        )).format(t=task)
        # Floor to whole minutes is the rule in the prompt; rounding to the nearest minute is also accepted.
        floor_minutes, nearest_minutes = gap // 60, round(gap / 60)
        truth = {
            "kind": "time_until", "reminder_id": reminder["reminder_id"], "content": task, "seconds": gap,
            "accepted": sorted({(floor_minutes // 60, floor_minutes % 60), (nearest_minutes // 60, nearest_minutes % 60)}),
        }
        return truth, request

    def _make_date_in_n_days(self, rng, now, today, holidays_ahead, reminders):
        n = rng.choice((10, 14, 21, 30, 45, 60, 75, 90, 100, 120, 150, 180, 200))
        request = rng.choice((
            "What's the date {n} days from today?", "Which date will it be in {n} days?",
            "If something is due {n} days from today, what date is that?",
        )).format(n=n)
        truth = {"kind": "date_after", "days": n, "date": (today + datetime.timedelta(days=n)).isoformat()}
        return truth, request

    # ---------------------------------------------------------------------------------- prompts
    def system_prompt(self, scenario: sdk.Scenario) -> str:
        # Deliberately no date here: the agent has to read the device clock.
        return (
            "You are an assistant running on the user's phone, with tools for reminders, device settings and "
            "date/time utilities. Timestamps are POSIX seconds, and the device clock and every time tool use UTC.\n\n"
            "Rules:\n"
            "- Never assume today's date or the current time. Call get_current_timestamp before working out any "
            "date, and do date arithmetic with the timestamp tools rather than in your head.\n"
            "- A weekday on its own ('next Friday', 'this coming Friday', 'on Friday') means the first such day "
            "after today; if today is that weekday, it means the one a week later.\n"
            "- 'In N days' and 'N weeks from today' count calendar days from today's date; a clock time the user "
            "names is on that day, in UTC.\n"
            "- search_holiday returns the date of a US holiday (midnight UTC); 'this year' means the current year.\n"
            "- 'How many days until' counts calendar days from today's date (tomorrow is 1 day away). 'How long "
            "until' is answered in hours and minutes, rounded down to the minute.\n"
            "- After creating a reminder, tell the user its exact date and time. Only create, change or delete "
            "reminders when the user asks for it."
        )

    def first_user_message(self, scenario: sdk.Scenario) -> str:
        return scenario.user["request"]

    # ---------------------------------------------------------------------------------- tools
    @sdk.tool
    def get_current_timestamp(self, state) -> float:
        return float(state["current_timestamp"])

    @sdk.tool
    def timestamp_to_datetime_info(self, state, timestamp: float) -> dict:
        moment = _check_timestamp(timestamp, "timestamp")
        return {"year": moment.year, "month": moment.month, "day": moment.day, "hour": moment.hour,
                "minute": moment.minute, "second": moment.second, "isoweekday": moment.isoweekday(),
                "timezone": "UTC"}

    @sdk.tool
    def datetime_info_to_timestamp(self, state, year: int, month: int, day: int, hour: int, minute: int,
                                   second: int) -> float:
        try:
            return datetime.datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()
        except (ValueError, OverflowError) as exc:
            raise sdk.ToolError(f"{exc}", exception="ValueError") from None

    @sdk.tool
    def shift_timestamp(self, state, timestamp: float, weeks: int = 0, days: int = 0, hours: int = 0,
                        minutes: int = 0, seconds: int = 0) -> float:
        moment = _check_timestamp(timestamp, "timestamp")
        try:
            shifted = moment + datetime.timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
        except OverflowError:
            raise sdk.ToolError("date value out of range", exception="OverflowError") from None
        return shifted.timestamp()

    @sdk.tool
    def timestamp_diff(self, state, timestamp_0: float, timestamp_1: float) -> dict:
        delta = _check_timestamp(timestamp_1, "timestamp_1") - _check_timestamp(timestamp_0, "timestamp_0")
        return {"days": delta.days, "seconds": delta.seconds}

    @sdk.tool
    def seconds_to_hours_minutes_seconds(self, state, seconds: float) -> dict:
        # As in ToolSandbox: the count is read as a time of day after 0:00, so it wraps at 24 hours.
        moment = _check_timestamp(seconds, "seconds")
        return {"hour": moment.hour, "minute": moment.minute, "second": moment.second}

    @sdk.tool
    def search_holiday(self, state, holiday_name: str, year: int = None):
        if not state["settings"]["wifi"]:  # an online lookup in ToolSandbox
            raise sdk.ToolError("Wifi is not enabled", exception="ConnectionError")
        if year is None:
            year = _date_of(state["current_timestamp"]).year
        if not 1 <= year <= 9998:
            raise sdk.ToolError(f"year {year} is out of range", exception="ValueError")
        canonical = find_holiday(holiday_name)
        if canonical is None:
            return None  # no holiday of that name: the real tool answers None
        return _midnight(us_holidays(year)[canonical])

    @sdk.tool
    def add_reminder(self, state, content: str, reminder_timestamp: float, latitude: float = None,
                     longitude: float = None) -> str:
        _check_timestamp(reminder_timestamp, "reminder_timestamp")
        if latitude is not None and not -90 <= latitude <= 90:
            raise sdk.ToolError(f"latitude {latitude} is outside [-90, 90]", exception="ValueError")
        if longitude is not None and not -180 <= longitude <= 180:
            raise sdk.ToolError(f"longitude {longitude} is outside [-180, 180]", exception="ValueError")
        reminder_id = _stable_uuid("reminder", len(state["reminders"]), content, reminder_timestamp)
        state["reminders"].append({
            "reminder_id": reminder_id, "content": content, "creation_timestamp": state["current_timestamp"],
            "reminder_timestamp": reminder_timestamp, "latitude": latitude, "longitude": longitude,
        })
        return reminder_id

    @sdk.tool
    def search_reminder(self, state, reminder_id: str = None, content: str = None,
                        creation_timestamp_lowerbound: float = None, creation_timestamp_upperbound: float = None,
                        reminder_timestamp_lowerbound: float = None, reminder_timestamp_upperbound: float = None,
                        latitude: float = None, longitude: float = None) -> list:
        bounds = (("creation_timestamp", creation_timestamp_lowerbound, creation_timestamp_upperbound),
                  ("reminder_timestamp", reminder_timestamp_lowerbound, reminder_timestamp_upperbound))
        found = []
        for reminder in state["reminders"]:
            if reminder_id is not None and reminder["reminder_id"] != reminder_id:
                continue
            # ToolSandbox matches content fuzzily with a low threshold: one shared word is enough here.
            if content is not None and not set(w for w in _words(content) if len(w) > 2) & set(_words(reminder["content"])):
                continue
            if latitude is not None and reminder["latitude"] != latitude:
                continue
            if longitude is not None and reminder["longitude"] != longitude:
                continue
            if any((low is not None and reminder[key] < low) or (high is not None and reminder[key] > high)
                   for key, low, high in bounds):
                continue
            found.append(dict(reminder))
        return found

    @sdk.tool
    def modify_reminder(self, state, reminder_id: str, content: str = None, reminder_timestamp: float = None,
                        latitude: float = None, longitude: float = None):
        updates = {"content": content, "reminder_timestamp": reminder_timestamp, "latitude": latitude,
                   "longitude": longitude}
        updates = {key: value for key, value in updates.items() if value is not None}
        if not updates:
            raise sdk.ToolError("No update information given. At least one new field should be provided "
                                "among [content, reminder_timestamp, latitude, longitude] in order to modify reminder", exception="ValueError")
        if reminder_timestamp is not None:
            _check_timestamp(reminder_timestamp, "reminder_timestamp")
        for reminder in state["reminders"]:
            if reminder["reminder_id"] == reminder_id:
                reminder.update(updates, creation_timestamp=state["current_timestamp"])
                return None
        raise sdk.ToolError(f"No db entry matching reminder_id='{reminder_id}' found", exception="NoDataError")

    @sdk.tool
    def remove_reminder(self, state, reminder_id: str):
        kept = [r for r in state["reminders"] if r["reminder_id"] != reminder_id]
        if len(kept) == len(state["reminders"]):
            raise sdk.ToolError(f"No db entry matching reminder_id='{reminder_id}' found", exception="NoDataError")
        state["reminders"] = kept
        return None

    @sdk.tool
    def get_wifi_status(self, state) -> bool:
        return bool(state["settings"]["wifi"])

    @sdk.tool
    def unit_conversion(self, state, amount: float, from_unit: str, to_unit: str) -> float:
        source, target = _unit(from_unit), _unit(to_unit)
        temperatures = ("celsius", "fahrenheit", "kelvin")
        if source in temperatures and target in temperatures:
            kelvin = {"celsius": amount + 273.15, "fahrenheit": (amount - 32) * 5 / 9 + 273.15, "kelvin": amount}[source]
            return {"celsius": kelvin - 273.15, "fahrenheit": (kelvin - 273.15) * 9 / 5 + 32, "kelvin": kelvin}[target]
        dim_s = "temperature" if source in temperatures else UNITS[source][0]
        dim_t = "temperature" if target in temperatures else UNITS[target][0]
        if dim_s != dim_t:
            raise sdk.ToolError(f"Cannot convert from '{from_unit}' ([{dim_s}]) to "
                                f"'{to_unit}' ([{dim_t}])", exception="DimensionalityError")
        return amount * UNITS[source][1] / UNITS[target][1]

    # ---------------------------------------------------------------------------------- grading
    def evaluate(self, episode: sdk.Episode) -> sdk.Reward:
        scenario, state, truth = episode.scenario, episode.state, episode.scenario.truth
        text = episode.assistant_text
        notes = {}
        initial = {r["reminder_id"]: r for r in scenario.state["reminders"]}
        final = {r["reminder_id"]: r for r in state["reminders"]}
        new = [r for rid, r in final.items() if rid not in initial]
        touched = [rid for rid, r in initial.items() if final.get(rid) != r]
        clock_at = episode.first_index("get_current_timestamp")

        if truth["kind"] == "reminder":
            target_day = datetime.date.fromisoformat(truth["date"])
            best_time, best_content = 0.0, 0.0
            for reminder in new:
                best_time = max(best_time, self._timestamp_score(reminder["reminder_timestamp"], truth))
                best_content = max(best_content, 1.0 if _overlap(truth["content"], reminder["content"]) >= 0.6 else 0.0)
            stated = (0.5 * mentions_date(text, target_day) + 0.5 * mentions_time(text, truth["hour"], truth["minute"]))
            committed_at = episode.first_index("add_reminder")
            checked = clock_at is not None and (committed_at is None or clock_at < committed_at)
            components = {"reminder_time": best_time, "reminder_content": best_content,
                          "stated_date": stated if new else 0.0, "checked_clock": 1.0 if checked else 0.0}
            weights = {"reminder_time": 3.0, "reminder_content": 1.0, "stated_date": 1.0, "checked_clock": 1.0}
            # Hedging with several reminders at different times is not an answer.
            extra = 0.5 if len(new) > 1 else 1.0
            gates = {"existing_reminders_untouched": 0.0 if touched else 1.0, "single_new_reminder": extra}
        else:
            answer = self._answer_score(text, truth)
            grounding_tool = {"days_until": ("search_holiday",), "time_until": ("search_reminder",),
                              "date_after": ("shift_timestamp", "timestamp_to_datetime_info")}[truth["kind"]]
            grounded = any(episode.calls(name, ok=True) for name in grounding_tool)
            components = {"answer": answer, "checked_clock": 1.0 if clock_at is not None else 0.0,
                          "used_time_tools": 1.0 if grounded else 0.0}
            weights = {"answer": 3.0, "checked_clock": 1.0, "used_time_tools": 1.0}
            gates = {"no_reminder_changes": 0.0 if (touched or new) else 1.0}
        if touched:
            notes["touched_reminders"] = ", ".join(touched)
        return sdk.Reward(components=components, weights=weights, gates=gates, notes=notes)

    @staticmethod
    def _timestamp_score(stamp: float, truth: dict) -> float:
        """1 for the exact moment (within a minute); 0.5 for the right day at the wrong time;
        0.25 for the right time one day off (the classic off-by-one); otherwise 0."""
        if abs(stamp - truth["reminder_timestamp"]) <= 60:
            return 1.0
        try:
            moment = datetime.datetime.fromtimestamp(stamp, UTC)
        except (OverflowError, OSError, ValueError):
            return 0.0
        target = datetime.date.fromisoformat(truth["date"])
        if moment.date() == target:
            return 0.5
        if abs((moment.date() - target).days) == 1 and (moment.hour, moment.minute) == (truth["hour"], truth["minute"]):
            return 0.25
        return 0.0

    @staticmethod
    def _answer_score(text: str, truth: dict) -> float:
        if truth["kind"] == "days_until":
            said = _durations(text, "day")
            if truth["days"] in said:
                return 1.0
            return 0.5 if said & {truth["days"] - 1, truth["days"] + 1} else 0.0  # counted from now, not today
        if truth["kind"] == "time_until":
            hours, minutes = _durations(text, "hour"), _durations(text, "minute")
            if any(h in hours and m in minutes for h, m in truth["accepted"]):
                return 1.0
            return 0.5 if any(h in hours for h, _ in truth["accepted"]) else 0.0
        target = datetime.date.fromisoformat(truth["date"])
        if mentions_date(text, target):
            return 1.0
        near = (target - datetime.timedelta(days=1), target + datetime.timedelta(days=1))
        return 0.5 if any(mentions_date(text, day) for day in near) else 0.0

    # ---------------------------------------------------------------------------------- solutions
    def reference_solution(self, scenario: sdk.Scenario) -> list[sdk.Turn]:
        """Read the clock, compute with the tools, commit the exact timestamp, state the date."""
        truth, now = scenario.truth, scenario.state["current_timestamp"]
        today = _date_of(now)
        turns = [sdk.call("get_current_timestamp"), sdk.call("timestamp_to_datetime_info", timestamp=now)]
        kind = truth["kind"]
        if kind == "reminder":
            hour, minute = truth["hour"], truth["minute"]
            if truth["how"] == "holiday":
                holiday_stamp = _midnight(us_holidays(today.year)[truth["holiday"]])
                turns.append(sdk.call("search_holiday", holiday_name=HOLIDAY_SPOKEN[truth["holiday"]]))
                turns.append(sdk.call("shift_timestamp", timestamp=holiday_stamp, days=truth["holiday_offset"],
                                      hours=hour, minutes=minute))
            else:
                today_at = _at(today, hour, minute)
                turns.append(sdk.call("datetime_info_to_timestamp", year=today.year, month=today.month,
                                      day=today.day, hour=hour, minute=minute, second=0))
                turns.append(sdk.call("shift_timestamp", timestamp=today_at, days=truth["days_ahead"]))
            turns.append(sdk.call("add_reminder", content=truth["content"][0].upper() + truth["content"][1:],
                                  reminder_timestamp=truth["reminder_timestamp"]))
            day = datetime.date.fromisoformat(truth["date"])
            turns.append(sdk.say(f"Your reminder to {truth['content']} is set for {_say_date(day)} at "
                                 f"{hour:02d}:{minute:02d} UTC."))
        elif kind == "days_until":
            day = datetime.date.fromisoformat(truth["date"])
            turns.append(sdk.call("datetime_info_to_timestamp", year=today.year, month=today.month, day=today.day,
                                  hour=0, minute=0, second=0))
            turns.append(sdk.call("search_holiday", holiday_name=HOLIDAY_SPOKEN[truth["holiday"]], year=day.year))
            turns.append(sdk.call("timestamp_diff", timestamp_0=_midnight(today), timestamp_1=_midnight(day)))
            turns.append(sdk.say(f"{HOLIDAY_SPOKEN[truth['holiday']][0].upper() + HOLIDAY_SPOKEN[truth['holiday']][1:]} "
                                 f"is on {_say_date(day)}, which is {truth['days']} days from today."))
        elif kind == "time_until":
            reminder = next(r for r in scenario.state["reminders"] if r["reminder_id"] == truth["reminder_id"])
            gap = reminder["reminder_timestamp"] - now
            turns.append(sdk.call("search_reminder", content=truth["content"]))
            turns.append(sdk.call("timestamp_diff", timestamp_0=now, timestamp_1=reminder["reminder_timestamp"]))
            turns.append(sdk.call("seconds_to_hours_minutes_seconds", seconds=float(int(gap))))
            hours, minutes = truth["accepted"][0]
            turns.append(sdk.say(f"Your reminder to {truth['content']} goes off in {hours} hours and {minutes} minutes."))
        else:
            day = datetime.date.fromisoformat(truth["date"])
            turns.append(sdk.call("shift_timestamp", timestamp=now, days=truth["days"]))
            turns.append(sdk.call("timestamp_to_datetime_info", timestamp=now + truth["days"] * 86400))
            turns.append(sdk.say(f"{truth['days']} days from today is {_say_date(day)}."))
        return turns

    def capability_skipping_solution(self, scenario: sdk.Scenario) -> list[sdk.Turn]:
        """An agent that never reads the clock: it takes STALE_NOW as 'now' and does the (otherwise correct)
        arithmetic from there, so every date it produces belongs to the wrong day."""
        truth = scenario.truth
        today = STALE_NOW.date()
        kind = truth["kind"]
        if kind == "reminder":
            if truth["how"] == "holiday":
                day = us_holidays(today.year)[truth["holiday"]] + datetime.timedelta(days=truth["holiday_offset"])
            elif truth["how"] == "weekday":
                weekday = datetime.date.fromisoformat(truth["date"]).weekday()
                day = today + datetime.timedelta(days=(weekday - today.weekday()) % 7 or 7)
            else:
                day = today + datetime.timedelta(days=truth["days_ahead"])
            stamp = _at(day, truth["hour"], truth["minute"])
            return [
                sdk.call("add_reminder", content=truth["content"][0].upper() + truth["content"][1:],
                         reminder_timestamp=stamp),
                sdk.say(f"Done! I set your reminder to {truth['content']} for {_say_date(day)} at "
                        f"{truth['hour']:02d}:{truth['minute']:02d}."),
            ]
        if kind == "days_until":
            day = us_holidays(today.year)[truth["holiday"]]
            if day <= today:
                day = us_holidays(today.year + 1)[truth["holiday"]]
            return [sdk.say(f"{HOLIDAY_SPOKEN[truth['holiday']]} is {(day - today).days} days away.")]
        if kind == "time_until":
            # It finds the reminder, but guesses that it is about 9 in the morning on that day.
            reminder = next(r for r in scenario.state["reminders"] if r["reminder_id"] == truth["reminder_id"])
            fires = datetime.datetime.fromtimestamp(reminder["reminder_timestamp"], UTC)
            gap = ((fires.hour * 60 + fires.minute) - (STALE_NOW.hour * 60 + STALE_NOW.minute)) % (24 * 60)
            return [
                sdk.call("search_reminder", content=truth["content"]),
                sdk.say(f"Your reminder fires at {fires:%H:%M}. It's about {STALE_NOW:%H:%M} now, so that's in "
                        f"{gap // 60} hours and {gap % 60} minutes."),
            ]
        day = today + datetime.timedelta(days=truth["days"])
        return [sdk.say(f"{truth['days']} days from today is {_say_date(day)}.")]


ENV = DatetimeReasoningEnv
