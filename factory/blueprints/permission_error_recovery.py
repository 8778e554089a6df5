"""Blueprint: recover from a phone action that a device setting blocks (target: ToolSandbox).

ToolSandbox's settings depend on one another, and its tools enforce that:

* sending a text needs cellular service (``ConnectionError: Cellular service is not enabled``);
* reading the current location needs location services (``PermissionError: Location service is not enabled.``);
* the holiday lookup is an online service and needs wifi (``ConnectionError: Wifi is not enabled``);
* while low battery mode is on, wifi, cellular service and location services refuse to switch on
  (``PermissionError: Wifi cannot be turned on in low battery mode``), and switching low battery mode on
  switches all three off.

So a request can fail one or two levels deep: "text Mia" -> cellular is off -> cellular cannot come on
because low battery mode is on. An agent with the capability reads each error, finds the setting that is
really in the way, fixes exactly that, retries the original action and tells the user what it changed.
Some scenarios are not blocked at all (or are blocked by something other than the obvious suspect), so an
agent that flips settings by reflex - "turn off low battery mode and turn wifi on, just in case" - is
penalised by a gate on unneeded setting changes.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import re

from env_registry import sdk

UTC = datetime.timezone.utc

# --------------------------------------------------------------------------------------------------
# World data. Everything random in a scenario is drawn from these pools with the seeded rng.
# --------------------------------------------------------------------------------------------------

FIRST_NAMES = (
    "Mia", "Noah", "Priya", "Lucas", "Sofia", "Ethan", "Amara", "Diego", "Hana", "Oliver", "Zara", "Mateo",
    "Leila", "Jonas", "Chloe", "Ravi", "Ingrid", "Tariq", "Yuki", "Camila", "Felix", "Nadia", "Owen", "Elif",
)
LAST_NAMES = (
    "Okafor", "Lindqvist", "Haddad", "Moreau", "Tanaka", "Castillo", "Brennan", "Kowalski", "Achebe", "Novak",
    "Delgado", "Sato", "Fitzgerald", "Reyes", "Nakamura", "Oyelaran", "Varga", "Holm", "Quintero", "Park",
)
RELATIONSHIPS = (
    "friend", "boss", "coworker", "sister", "brother", "mother", "father", "neighbor", "landlord", "roommate",
    "cousin", "partner", "trainer", "babysitter",
)
AREA_CODES = ("212", "310", "415", "512", "617", "702", "206", "303", "404", "503", "713", "818", "919", "646")

MESSAGE_TEXTS = (
    "Running {n} minutes late, start without me",
    "Can you pick up bread on your way home?",
    "The meeting moved to {h} o'clock",
    "Don't forget the concert tickets tonight",
    "I left my keys at your place, can I grab them later?",
    "Dinner at {h} still works for me",
    "Call me when you land",
    "Happy birthday! Hope your day is great",
    "The package arrived, it's on the porch",
    "Parking is full, I'll meet you at the north entrance",
    "Thanks again for the help with the move",
    "Rent transfer is done for this month",
    "Practice is cancelled today, the field is flooded",
    "Can we push our call by {n} minutes?",
)
OLD_MESSAGE_TEXTS = (
    "See you tomorrow", "Sounds good", "Are we still on for Saturday?", "Got it, thanks",
    "Where did you park?", "Running late", "Can you send me the address?", "Ok, talk soon",
)
REMINDER_TASKS = (
    "pick up the dry cleaning", "water the plants", "grab the package from the front desk",
    "check the parking meter", "buy milk and eggs", "call the landlord", "return the library books",
    "feed the neighbor's cat", "move the car for street cleaning", "take the laundry out",
    "collect the bike from the repair shop", "drop off the recycling",
)
OLD_REMINDERS = ("Renew passport", "Book dentist appointment", "Pay electricity bill", "Order printer ink",
                 "Send thank-you cards", "Back up laptop")
PLACES = (  # a few real-ish spots so coordinates look plausible
    (37.3349, -122.0090), (40.7580, -73.9855), (47.6205, -122.3493), (30.2672, -97.7431),
    (41.8827, -87.6233), (25.7617, -80.1918), (39.7392, -104.9903), (42.3601, -71.0589),
    (34.0522, -118.2437), (45.5152, -122.6784), (36.1699, -115.1398), (33.7490, -84.3880),
)

# Settings as ToolSandbox names its columns, the words people use for them, and their tools.
SETTINGS = ("low_battery_mode", "wifi", "cellular", "location_service")
SETTING_NAMES = {
    "low_battery_mode": "low battery mode",
    "wifi": "Wi-Fi",
    "cellular": "cellular service",
    "location_service": "location services",
}
SETTING_WORDS = {  # how a final message may refer to a setting
    "low_battery_mode": ("low battery", "low-battery", "low power", "battery saver"),
    "wifi": ("wifi", "wi-fi"),
    "cellular": ("cellular", "mobile data", "cell service"),
    "location_service": ("location",),
}
SETTER = {
    "low_battery_mode": "set_low_battery_mode_status",
    "wifi": "set_wifi_status",
    "cellular": "set_cellular_service_status",
    "location_service": "set_location_service_status",
}
# The error text each dependent setting gives when low battery mode refuses to let it switch on.
LOW_BATTERY_REFUSAL = {
    "wifi": "Wifi cannot be turned on in low battery mode",
    "cellular": "Cellular service cannot be turned on in low battery mode",
    "location_service": "Location service cannot be turned on in low battery mode",
}

# Scenario variants. `goal` is what the user asks for; `low_battery` whether low battery mode starts on;
# `requires` the settings that must end in a given state for the goal to succeed (the blocker chain).
# Unblocked variants carry a `decoy`: a setting that looks relevant but is not needed.
VARIANTS = {
    "message_cellular_off": {"goal": "message", "low_battery": False, "requires": {"cellular": True}, "weight": 3},
    "message_low_battery": {
        "goal": "message", "low_battery": True, "requires": {"cellular": True, "low_battery_mode": False}, "weight": 3,
    },
    "enable_setting_low_battery": {"goal": "setting", "low_battery": True, "requires": {"low_battery_mode": False}, "weight": 2.5},
    "location_reminder_location_off": {
        "goal": "location_reminder", "low_battery": False, "requires": {"location_service": True}, "weight": 2,
    },
    "location_reminder_low_battery": {
        "goal": "location_reminder", "low_battery": True,
        "requires": {"location_service": True, "low_battery_mode": False}, "weight": 2,
    },
    "holiday_wifi_off": {"goal": "holiday", "low_battery": False, "requires": {"wifi": True}, "weight": 1.5},
    "holiday_low_battery": {
        "goal": "holiday", "low_battery": True, "requires": {"wifi": True, "low_battery_mode": False}, "weight": 1.5,
    },
    # Nothing is blocked in these three; each starts with a tempting but irrelevant setting in the "wrong" state.
    "message_unblocked": {"goal": "message", "low_battery": False, "requires": {}, "decoy": "wifi", "weight": 1.5},
    "location_reminder_unblocked": {
        "goal": "location_reminder", "low_battery": False, "requires": {}, "decoy": "wifi", "weight": 1.2,
    },
    "contact_low_battery": {"goal": "contact", "low_battery": True, "requires": {}, "decoy": "low_battery_mode", "weight": 1.3},
}

HOLIDAY_QUESTIONS = (
    ("Thanksgiving", "Thanksgiving"), ("Memorial Day", "Memorial Day"), ("Labor Day", "Labor Day"),
    ("Martin Luther King Jr. Day", "MLK Day"), ("Washington's Birthday", "Presidents' Day"),
    ("Columbus Day", "Columbus Day"),
)
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


# --------------------------------------------------------------------------------------------------
# Small pure helpers
# --------------------------------------------------------------------------------------------------

def _uuid(rng) -> str:
    """A uuid4-shaped id from the seeded rng (ToolSandbox ids are uuid4 strings)."""
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def _stable_uuid(*parts) -> str:
    """A uuid4-shaped id for records the tools create: derived from content, so replays are identical."""
    h = hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def _words(text) -> list[str]:
    return re.sub(r"[^a-z0-9]+", " ", str(text).lower()).split()


def _fuzzy(query, value, every_word: bool = True) -> bool:
    """A forgiving stand-in for ToolSandbox's fuzzy string match: word prefixes, case and punctuation ignored."""
    q, v = _words(query), _words(value)
    if not q or not v:
        return False
    if " ".join(q) in " ".join(v):
        return True
    hits = [any(w.startswith(t) or (len(w) >= 3 and t.startswith(w)) for w in v) for t in q]
    return all(hits) if every_word else any(hit for hit, t in zip(hits, q) if len(t) >= 3)


def _overlap(expected, actual) -> float:
    """Share of the expected text's words that appear in the actual text (how faithfully content was kept)."""
    want = _words(expected)
    have = set(_words(actual))
    return sum(w in have for w in want) / len(want) if want else 0.0


def _digits(phone) -> str:
    return re.sub(r"\D", "", str(phone))


def _check_phone(phone_number: str) -> None:
    # ToolSandbox parses numbers with `phonenumbers` and no default region: an international "+" form is required.
    cleaned = re.sub(r"[\s\-().]", "", phone_number)
    if not re.fullmatch(r"\+\d{7,15}", cleaned):
        raise sdk.ToolError(f"(0) Missing or invalid default region. ({phone_number!r})", exception="NumberParseException")


def _check_timestamp(value: float, name: str) -> datetime.datetime:
    if not math.isfinite(value):
        raise sdk.ToolError(f"{name} must be a finite POSIX timestamp", exception="ValueError")
    try:
        return datetime.datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        raise sdk.ToolError(f"{name}={value} is outside the supported date range", exception="ValueError") from None


def _nth_weekday(year: int, month: int, weekday: int, n: int) -> datetime.date:
    """The n-th given weekday (Mon=0) of a month; n=-1 is the last one."""
    if n > 0:
        first = datetime.date(year, month, 1)
        return first + datetime.timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))
    last = datetime.date(year + (month == 12), month % 12 + 1, 1) - datetime.timedelta(days=1)
    return last - datetime.timedelta(days=(last.weekday() - weekday) % 7)


def us_holidays(year: int) -> dict[str, datetime.date]:
    """US federal holidays of a year, computed by rule (the dates themselves, not the observed days off)."""
    return {
        "New Year's Day": datetime.date(year, 1, 1),
        "Martin Luther King Jr. Day": _nth_weekday(year, 1, 0, 3),
        "Washington's Birthday": _nth_weekday(year, 2, 0, 3),
        "Memorial Day": _nth_weekday(year, 5, 0, -1),
        "Juneteenth National Independence Day": datetime.date(year, 6, 19),
        "Independence Day": datetime.date(year, 7, 4),
        "Labor Day": _nth_weekday(year, 9, 0, 1),
        "Columbus Day": _nth_weekday(year, 10, 0, 2),
        "Veterans Day": datetime.date(year, 11, 11),
        "Thanksgiving": _nth_weekday(year, 11, 3, 4),
        "Christmas Day": datetime.date(year, 12, 25),
    }


HOLIDAY_ALIASES = {  # everyday names -> the canonical name above
    "new year": "New Year's Day", "mlk": "Martin Luther King Jr. Day", "martin luther king": "Martin Luther King Jr. Day",
    "president": "Washington's Birthday", "washington": "Washington's Birthday",
    "memorial": "Memorial Day", "juneteenth": "Juneteenth National Independence Day",
    "independence day": "Independence Day", "fourth of july": "Independence Day", "4th of july": "Independence Day",
    "july 4": "Independence Day", "labor day": "Labor Day", "labour day": "Labor Day", "columbus": "Columbus Day",
    "indigenous peoples": "Columbus Day", "veteran": "Veterans Day", "thanksgiving": "Thanksgiving",
    "christmas": "Christmas Day", "xmas": "Christmas Day",
}


def find_holiday(name: str) -> str | None:
    text = " ".join(_words(name))
    for alias, canonical in HOLIDAY_ALIASES.items():
        if alias in text:
            return canonical
    return None


def _say_date(day: datetime.date) -> str:
    return f"{WEEKDAYS[day.weekday()]}, {MONTHS[day.month - 1]} {day.day}, {day.year}"


def mentions_date(text: str, day: datetime.date) -> bool:
    """Whether ``text`` names this calendar day (month name and day, ISO, or US numeric form)."""
    low = text.lower()
    month = MONTHS[day.month - 1].lower()
    d = day.day
    patterns = (
        rf"\b{month[:3]}[a-z]*\.?\s+0?{d}(?:st|nd|rd|th)?\b",
        rf"\b0?{d}(?:st|nd|rd|th)?\s+(?:of\s+)?{month[:3]}",
        rf"\b{day.year}-{day.month:02d}-{d:02d}\b",
        rf"\b0?{day.month}/0?{d}(?:/(?:{day.year}|{day.year % 100:02d}))?\b",
    )
    return any(re.search(p, low) for p in patterns)


def _mentions(text: str, words) -> bool:
    low = text.lower()
    return any(w in low for w in words)


# --------------------------------------------------------------------------------------------------
# The env
# --------------------------------------------------------------------------------------------------

class PermissionErrorRecoveryEnv(sdk.TaskEnv):
    capability = "permission_error_recovery"
    target = "toolsandbox"
    description = (
        "Recovering from a blocked action on a phone whose settings depend on one another. The user asks for "
        "something ordinary - text a contact, switch on wifi or cellular, set a reminder pinned to the current "
        "location, look up a holiday date - and the tool fails because a setting is off (cellular, location "
        "services, wifi), sometimes two levels deep because low battery mode stops that setting from switching "
        "on. The agent must read the error, find the real blocker, fix exactly that, retry the original action "
        "and report which settings it changed. Some scenarios are not blocked at all, so reflexively toggling "
        "settings is gated to zero."
    )
    tool_names = [
        "search_contacts",
        "search_messages",
        "send_message_with_phone_number",
        "add_contact",
        "add_reminder",
        "search_reminder",
        "get_low_battery_mode_status",
        "get_wifi_status",
        "get_cellular_service_status",
        "get_location_service_status",
        "set_low_battery_mode_status",
        "set_wifi_status",
        "set_cellular_service_status",
        "set_location_service_status",
        "get_current_location",
        "get_current_timestamp",
        "shift_timestamp",
        "timestamp_to_datetime_info",
        "search_holiday",
    ]
    write_tools = frozenset({
        "send_message_with_phone_number", "add_contact", "add_reminder", "set_low_battery_mode_status",
        "set_wifi_status", "set_cellular_service_status", "set_location_service_status",
    })
    max_steps = 24

    # ---------------------------------------------------------------------------------- scenario
    def generate(self, seed: int) -> sdk.Scenario:
        rng = self.rng(seed)
        names = list(VARIANTS)
        variant_name = rng.choices(names, weights=[VARIANTS[n]["weight"] for n in names])[0]
        variant = VARIANTS[variant_name]

        # Device clock: a random moment between 2025 and 2030 (UTC), with sub-second noise like a real clock.
        start = datetime.datetime(2025, 1, 1, tzinfo=UTC).timestamp()
        now = round(start + rng.uniform(0, 6 * 365 * 86400), 3)
        lat, lon = rng.choice(PLACES)
        lat, lon = round(lat + rng.uniform(-0.02, 0.02), 6), round(lon + rng.uniform(-0.02, 0.02), 6)

        contacts = self._make_contacts(rng)
        owner = contacts[0]
        others = contacts[1:]
        messages = self._make_messages(rng, owner, others, now)
        reminders = [
            {
                "reminder_id": _uuid(rng),
                "content": text,
                "creation_timestamp": round(now - rng.uniform(2, 20) * 86400, 3),
                "reminder_timestamp": round(now + rng.uniform(-3, 10) * 86400, 3),
                "latitude": None,
                "longitude": None,
            }
            for text in rng.sample(OLD_REMINDERS, rng.randint(1, 3))
        ]

        settings = self._make_settings(rng, variant)
        settings.update(latitude=lat, longitude=lon)
        goal, user = self._make_goal(rng, variant, others, now, lat, lon)
        rng.shuffle(contacts)  # the owner need not come first in the contact book

        requires = dict(variant["requires"])
        allowed = sorted(set(requires) | ({goal["setting"]} if goal["kind"] == "setting" else set()))
        truth = {
            "goal": goal,
            "requires": requires,  # blocker settings and the value each must end with
            "allowed_settings": allowed,  # the only settings the agent may change
            "blocked": bool(requires) or goal["kind"] == "setting",
        }
        state = {
            "current_timestamp": now,
            "timezone": "UTC",
            "settings": settings,
            "contacts": contacts,
            "messages": messages,
            "reminders": reminders,
        }
        return sdk.Scenario(seed=seed, state=state, user=user, truth=truth, meta={"variant": variant_name})

    def _make_contacts(self, rng) -> list[dict]:
        count = rng.randint(5, 8)
        firsts = rng.sample(FIRST_NAMES, count)
        lasts = rng.sample(LAST_NAMES, count)
        relations = rng.sample(RELATIONSHIPS, count - 1)
        contacts = []
        for index, (first, last) in enumerate(zip(firsts, lasts)):
            phone = f"+1{rng.choice(AREA_CODES)}{rng.randint(2000000, 9999999)}"
            contacts.append({
                "person_id": _uuid(rng),
                "name": f"{first} {last}",
                "phone_number": phone,
                "relationship": "self" if index == 0 else relations[index - 1],
                "is_self": index == 0,
            })
        return contacts

    def _make_messages(self, rng, owner, others, now) -> list[dict]:
        messages = []
        for _ in range(rng.randint(2, 5)):
            other = rng.choice(others)
            outgoing = rng.random() < 0.5
            sender, recipient = (owner, other) if outgoing else (other, owner)
            messages.append({
                "message_id": _uuid(rng),
                "sender_person_id": sender["person_id"],
                "sender_phone_number": sender["phone_number"],
                "recipient_person_id": recipient["person_id"],
                "recipient_phone_number": recipient["phone_number"],
                "content": rng.choice(OLD_MESSAGE_TEXTS),
                "creation_timestamp": round(now - rng.uniform(0.1, 9) * 86400, 3),
            })
        messages.sort(key=lambda m: m["creation_timestamp"])
        return messages

    def _make_settings(self, rng, variant) -> dict:
        if variant["low_battery"]:
            # ToolSandbox's invariant: switching low battery mode on switches the three radios off.
            return {"low_battery_mode": True, "wifi": False, "cellular": False, "location_service": False}
        settings = {"low_battery_mode": False}
        for name in ("wifi", "cellular", "location_service"):
            settings[name] = rng.random() < 0.6
        for name, needed in variant["requires"].items():
            settings[name] = not needed  # the blocker starts in the blocking state
        goal_setting_on = {"message": "cellular", "location_reminder": "location_service", "holiday": "wifi"}
        if not variant["requires"] and variant["goal"] in goal_setting_on:
            settings[goal_setting_on[variant["goal"]]] = True  # unblocked: the needed radio is on
        if variant.get("decoy") in ("wifi", "cellular", "location_service"):
            settings[variant["decoy"]] = False  # tempting to switch on, but not needed
        return settings

    def _make_goal(self, rng, variant, others, now, lat, lon) -> tuple[dict, dict]:
        kind = variant["goal"]
        if kind == "message":
            target = rng.choice(others)
            content = rng.choice(MESSAGE_TEXTS).format(n=rng.choice((5, 10, 15, 20, 25)), h=rng.randint(2, 8))
            by_relation = rng.random() < 0.35
            who = f"my {target['relationship']}" if by_relation else target["name"]
            text = rng.choice((
                'Send a text to {who} saying "{content}".',
                'Can you message {who}: "{content}"',
                "Please text {who} the following: {content}",
                'I need to let {who} know something. Send them: "{content}"',
            )).format(who=who, content=content)
            goal = {"kind": "message", "person_id": target["person_id"], "name": target["name"],
                    "phone_number": target["phone_number"], "content": content,
                    "search": {"relationship": target["relationship"]} if by_relation else {"name": target["name"]}}
            facts = [
                [["which contact", "who should i", "who is the recipient", "who do you want"],
                 f"It's {target['name']}, they're saved in my contacts."],
                [["what should the message say", "what would you like the message to say", "what should i write"],
                 f"Just send: {content}"],
            ]
        elif kind == "setting":
            setting = rng.choice(("wifi", "cellular", "location_service"))
            label = rng.choice({
                "wifi": ("wifi", "Wi-Fi", "my wifi"),
                "cellular": ("cellular service", "cellular data", "mobile data"),
                "location_service": ("location services", "location", "GPS location"),
            }[setting])
            text = rng.choice((
                "Turn on {label} please.", "I need {label} on right now.", "Can you switch {label} on for me?",
                "Please enable {label}.", "Hey, {label} seems to be off. Turn it on?",
            )).format(label=label)
            goal = {"kind": "setting", "setting": setting}
            facts = []
        elif kind == "location_reminder":
            task = rng.choice(REMINDER_TASKS)
            hours = rng.randint(1, 6)
            text = rng.choice((
                "Remind me to {task} when I'm back at this spot, in {h} hours.",
                "Set a reminder {h} hours from now to {task}, tied to where I am right now.",
                "In {h} hours, remind me to {task}. Attach my current location to it.",
                "I'll be back here later. Make a reminder to {task} in {h} hours with this location on it.",
            )).format(task=task, h=hours if rng.random() < 0.6 else ("one", "two", "three", "four", "five", "six")[hours - 1])
            goal = {"kind": "location_reminder", "content": task, "hours": hours,
                    "reminder_timestamp": round(now + hours * 3600, 3), "latitude": lat, "longitude": lon}
            facts = [[["what time should", "when should", "how many hours from now"], f"In {hours} hours from now."]]
        elif kind == "holiday":
            canonical, spoken = rng.choice(HOLIDAY_QUESTIONS)
            year = rng.randint(2025, 2032)
            date = us_holidays(year)[canonical]
            text = rng.choice((
                "What date is {h} in {y}?", "When does {h} fall in {y}?", "Can you look up the date of {h} {y}?",
                "I'm planning a trip. Which day is {h} in {y}?",
            )).format(h=spoken, y=year)
            goal = {"kind": "holiday", "holiday": canonical, "spoken": spoken, "year": year, "date": date.isoformat()}
            facts = [[["which year", "what year should"], f"{year}."]]
        else:  # contact
            first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
            while any(c["name"] == f"{first} {last}" for c in others):
                first = rng.choice(FIRST_NAMES)
            phone = f"+1{rng.choice(AREA_CODES)}{rng.randint(2000000, 9999999)}"
            relation = rng.choice(("friend", "coworker", "plumber", "tutor", "vet"))
            text = rng.choice((
                "Add {name} to my contacts, number {phone}.", "Save a new contact: {name}, {phone}.",
                "Please create a contact for {name} ({rel}) with the number {phone}.",
            )).format(name=f"{first} {last}", phone=phone, rel=relation)
            goal = {"kind": "contact", "name": f"{first} {last}", "phone_number": phone}
            facts = [[["what is their number", "what's their number", "what is the phone number", "which number"],
                      f"The number is {phone}."]]
        persona = rng.choice((
            "busy commuter who wants things done quickly", "relaxed user who trusts the assistant",
            "slightly anxious user whose phone battery is often low", "traveller juggling plans on the go",
        ))
        return goal, {"request": text, "persona": persona, "facts": facts}

    # ---------------------------------------------------------------------------------- prompts
    def system_prompt(self, scenario: sdk.Scenario) -> str:
        return (
            "You are an assistant running on the user's phone. You act through the tools provided: contacts, "
            "messages, reminders, device settings and a few utilities. Timestamps are POSIX seconds and the device "
            "clock runs in UTC.\n\n"
            "Rules:\n"
            "- Look things up with the tools (contacts, phone numbers, locations, times) instead of guessing them.\n"
            "- Device settings depend on one another. Texting needs cellular service; reading the current location "
            "needs location services; online lookups such as holidays need wifi; and while low battery mode is on, "
            "wifi, cellular service and location services cannot be switched on.\n"
            "- When a tool fails, read the error. If a setting is in the way, fix that setting (and whatever blocks "
            "it in turn), then retry the original action. You may do this without asking first.\n"
            "- Change only settings that actually block the request. Do not toggle other settings 'just in case', "
            "and leave a setting you had to change in its new state.\n"
            "- When you are done, tell the user the outcome and name every setting you changed."
        )

    def first_user_message(self, scenario: sdk.Scenario) -> str:
        return scenario.user["request"]

    # ---------------------------------------------------------------------------------- helpers for tools
    @staticmethod
    def _now(state) -> float:
        return float(state["current_timestamp"])

    @staticmethod
    def _flip(state, setting: str, on: bool) -> None:
        settings = state["settings"]
        if bool(settings[setting]) == on:
            raise sdk.ToolError(f"{setting} already {'enabled' if on else 'disabled'}", exception="ValueError")
        settings[setting] = on

    def _radio_on(self, state, setting: str, on: bool) -> None:
        if on and state["settings"]["low_battery_mode"]:
            raise sdk.ToolError(LOW_BATTERY_REFUSAL[setting], exception="PermissionError")
        self._flip(state, setting, on)

    # ---------------------------------------------------------------------------------- tools: settings
    @sdk.tool
    def get_low_battery_mode_status(self, state) -> bool:
        return bool(state["settings"]["low_battery_mode"])

    @sdk.tool
    def get_wifi_status(self, state) -> bool:
        return bool(state["settings"]["wifi"])

    @sdk.tool
    def get_cellular_service_status(self, state) -> bool:
        return bool(state["settings"]["cellular"])

    @sdk.tool
    def get_location_service_status(self, state) -> bool:
        return bool(state["settings"]["location_service"])

    @sdk.tool
    def set_low_battery_mode_status(self, state, on: bool):
        self._flip(state, "low_battery_mode", on)
        if on:  # low battery mode switches its dependents off
            for setting in ("cellular", "wifi", "location_service"):
                state["settings"][setting] = False
        return None

    @sdk.tool
    def set_wifi_status(self, state, on: bool):
        self._radio_on(state, "wifi", on)
        return None

    @sdk.tool
    def set_cellular_service_status(self, state, on: bool):
        self._radio_on(state, "cellular", on)
        return None

    @sdk.tool
    def set_location_service_status(self, state, on: bool):
        self._radio_on(state, "location_service", on)
        return None

    @sdk.tool
    def get_current_location(self, state) -> dict:
        if not state["settings"]["location_service"]:
            raise sdk.ToolError("Location service is not enabled.", exception="PermissionError")
        return {"latitude": state["settings"]["latitude"], "longitude": state["settings"]["longitude"]}

    # ---------------------------------------------------------------------------------- tools: contacts, messages
    @sdk.tool
    def search_contacts(self, state, person_id: str = None, name: str = None, phone_number: str = None,
                        relationship: str = None, is_self: bool = None) -> list:
        if phone_number is not None:
            _check_phone(phone_number)
        found = []
        for contact in state["contacts"]:
            if person_id is not None and contact["person_id"] != person_id:
                continue
            if name is not None and not _fuzzy(name, contact["name"]):
                continue
            if phone_number is not None and contact["phone_number"] != phone_number:
                continue
            if relationship is not None and not _fuzzy(relationship, contact["relationship"] or ""):
                continue
            if is_self is not None and contact["is_self"] != is_self:
                continue
            found.append(dict(contact))
        return found

    @sdk.tool
    def add_contact(self, state, name: str, phone_number: str, relationship: str = None, is_self: bool = False) -> str:
        _check_phone(phone_number)
        if is_self and any(c["is_self"] for c in state["contacts"]):
            raise sdk.ToolError("Self entry already exists. Cannot add another one.", exception="DuplicateError")
        person_id = _stable_uuid("contact", len(state["contacts"]), name, phone_number)
        state["contacts"].append({"person_id": person_id, "name": name, "phone_number": phone_number,
                                  "relationship": relationship, "is_self": is_self})
        return person_id

    @sdk.tool
    def search_messages(self, state, message_id: str = None, sender_person_id: str = None,
                        sender_phone_number: str = None, recipient_person_id: str = None,
                        recipient_phone_number: str = None, content: str = None,
                        creation_timestamp_lowerbound: float = None,
                        creation_timestamp_upperbound: float = None) -> list:
        for phone in (sender_phone_number, recipient_phone_number):
            if phone is not None:
                _check_phone(phone)
        exact = {"message_id": message_id, "sender_person_id": sender_person_id,
                 "sender_phone_number": sender_phone_number, "recipient_person_id": recipient_person_id,
                 "recipient_phone_number": recipient_phone_number}
        found = []
        for message in state["messages"]:
            if any(value is not None and message[key] != value for key, value in exact.items()):
                continue
            if content is not None and not _fuzzy(content, message["content"], every_word=False):
                continue
            stamp = message["creation_timestamp"]
            if creation_timestamp_lowerbound is not None and stamp < creation_timestamp_lowerbound:
                continue
            if creation_timestamp_upperbound is not None and stamp > creation_timestamp_upperbound:
                continue
            found.append(dict(message))
        return found

    @sdk.tool
    def send_message_with_phone_number(self, state, phone_number: str, content: str) -> str:
        _check_phone(phone_number)
        if not state["settings"]["cellular"]:
            raise sdk.ToolError("Cellular service is not enabled", exception="ConnectionError")
        owners = [c for c in state["contacts"] if c["is_self"]]
        if len(owners) != 1:
            raise sdk.ToolError(f"1 and only 1 self entry should exist in contacts database, "
                                f"instead found {len(owners)}", exception="DuplicateError")
        recipient = next((c for c in state["contacts"] if c["phone_number"] == phone_number), None)
        message_id = _stable_uuid("message", len(state["messages"]), phone_number, content)
        state["messages"].append({
            "message_id": message_id,
            "sender_person_id": owners[0]["person_id"],
            "sender_phone_number": owners[0]["phone_number"],
            "recipient_person_id": recipient["person_id"] if recipient else None,
            "recipient_phone_number": phone_number,
            "content": content,
            "creation_timestamp": self._now(state),
        })
        return message_id

    # ---------------------------------------------------------------------------------- tools: reminders, time
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
            "reminder_id": reminder_id, "content": content, "creation_timestamp": self._now(state),
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
            if content is not None and not _fuzzy(content, reminder["content"], every_word=False):
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
    def get_current_timestamp(self, state) -> float:
        return self._now(state)

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
    def timestamp_to_datetime_info(self, state, timestamp: float) -> dict:
        moment = _check_timestamp(timestamp, "timestamp")
        return {"year": moment.year, "month": moment.month, "day": moment.day, "hour": moment.hour,
                "minute": moment.minute, "second": moment.second, "isoweekday": moment.isoweekday(),
                "timezone": "UTC"}

    @sdk.tool
    def search_holiday(self, state, holiday_name: str, year: int = None):
        # ToolSandbox treats the holiday lookup as an online service: it needs wifi.
        if not state["settings"]["wifi"]:
            raise sdk.ToolError("Wifi is not enabled", exception="ConnectionError")
        if year is None:
            year = datetime.datetime.fromtimestamp(self._now(state), UTC).year
        if not 1 <= year <= 9998:
            raise sdk.ToolError(f"year {year} is out of range", exception="ValueError")
        canonical = find_holiday(holiday_name)
        if canonical is None:
            return None  # the real tool answers None when no holiday name matches well enough
        day = us_holidays(year)[canonical]
        return datetime.datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()

    # ---------------------------------------------------------------------------------- grading
    def evaluate(self, episode: sdk.Episode) -> sdk.Reward:
        scenario, state = episode.scenario, episode.state
        truth, goal = scenario.truth, scenario.truth["goal"]
        initial = scenario.state
        text = episode.assistant_text
        notes = {}

        # 1. Was the user's original request carried out? (final state, or the stated answer for a lookup)
        goal_score = 0.0
        old_messages = {m["message_id"] for m in initial["messages"]}
        new_messages = [m for m in state["messages"] if m["message_id"] not in old_messages]
        old_reminders = {r["reminder_id"] for r in initial["reminders"]}
        new_reminders = [r for r in state["reminders"] if r["reminder_id"] not in old_reminders]
        old_contacts = {c["person_id"] for c in initial["contacts"]}
        new_contacts = [c for c in state["contacts"] if c["person_id"] not in old_contacts]
        if goal["kind"] == "message":
            to_target = [m for m in new_messages if _digits(m["recipient_phone_number"]) == _digits(goal["phone_number"])]
            if to_target:
                best = max(_overlap(goal["content"], m["content"]) for m in to_target)
                goal_score = 1.0 if best >= 0.7 else 0.5
        elif goal["kind"] == "setting":
            goal_score = 1.0 if state["settings"][goal["setting"]] else 0.0
        elif goal["kind"] == "location_reminder":
            for reminder in new_reminders:
                placed = (reminder["latitude"] is not None and reminder["longitude"] is not None
                          and abs(reminder["latitude"] - goal["latitude"]) < 1e-4
                          and abs(reminder["longitude"] - goal["longitude"]) < 1e-4)
                timed = abs(reminder["reminder_timestamp"] - goal["reminder_timestamp"]) <= 120
                worded = _overlap(goal["content"], reminder["content"]) >= 0.5
                score = (0.5 * placed + 0.3 * timed + 0.2 * worded)
                goal_score = max(goal_score, score)
        elif goal["kind"] == "holiday":
            day = datetime.date.fromisoformat(goal["date"])
            goal_score = 1.0 if mentions_date(text, day) else 0.0
        elif goal["kind"] == "contact":
            for contact in new_contacts:
                if _digits(contact["phone_number"]) == _digits(goal["phone_number"]):
                    goal_score = max(goal_score, 1.0 if _overlap(goal["name"], contact["name"]) >= 0.99 else 0.5)

        # 2. Is every blocker in the state the request needs?
        requires = truth["requires"]
        if requires:
            fixed = sum(state["settings"][name] == value for name, value in requires.items())
            blocker_score = fixed / len(requires)
        else:
            blocker_score = 1.0

        # 3. Did the user hear the outcome and which settings were changed?
        changed = [name for name in SETTINGS if state["settings"][name] != initial["settings"][name]]
        topic = {
            "message": [goal.get("name", "").split(" ")[0].lower(), "message", "text"],
            "setting": list(SETTING_WORDS.get(goal.get("setting", ""), ())),
            "location_reminder": ["reminder"],
            "holiday": [goal.get("spoken", "").lower()],
            "contact": [goal.get("name", "").split(" ")[0].lower()],
        }[goal["kind"]]
        checks = [_mentions(text, topic)] + [_mentions(text, SETTING_WORDS[name]) for name in changed]
        reported = sum(checks) / len(checks) if text else 0.0

        # Gate: a setting outside the blocker chain was switched (even if switched back later).
        toggled = [name for name in SETTINGS if episode.calls(SETTER[name], ok=True)]
        unneeded = [name for name in toggled if name not in truth["allowed_settings"]]
        if unneeded:
            notes["unneeded_setting_changes"] = ", ".join(unneeded)
        # Gate: writes the user never asked for (a text to someone else, stray reminders or contacts).
        stray = 0
        if goal["kind"] == "message":
            stray += sum(_digits(m["recipient_phone_number"]) != _digits(goal["phone_number"]) for m in new_messages)
        else:
            stray += len(new_messages)
        stray += len(new_reminders) if goal["kind"] != "location_reminder" else max(0, len(new_reminders) - 1)
        stray += len(new_contacts) if goal["kind"] != "contact" else max(0, len(new_contacts) - 1)
        if stray:
            notes["unrequested_writes"] = str(stray)

        return sdk.Reward(
            components={"goal_achieved": goal_score, "blocker_fixed": blocker_score, "reported_outcome": reported},
            weights={"goal_achieved": 3.0, "blocker_fixed": 1.5, "reported_outcome": 1.0},
            gates={"no_unneeded_setting_change": 0.0 if unneeded else 1.0,
                   "no_unrequested_writes": 0.0 if stray else 1.0},
            notes=notes,
        )

    # ---------------------------------------------------------------------------------- solutions
    def _goal_turns(self, scenario: sdk.Scenario) -> tuple[list[sdk.Turn], list[sdk.Turn]]:
        """(look-ups to do first, the action that may be blocked and what follows it once it works)."""
        goal = scenario.truth["goal"]
        state = scenario.state
        kind = goal["kind"]
        if kind == "message":
            # sdk.calls (not sdk.call) because these tools have a parameter literally called "name".
            return ([sdk.calls(("search_contacts", goal["search"]))],
                    [sdk.call("send_message_with_phone_number", phone_number=goal["phone_number"], content=goal["content"])])
        if kind == "setting":
            return [], [sdk.call(SETTER[goal["setting"]], on=True)]
        if kind == "location_reminder":
            now = state["current_timestamp"]
            when = datetime.datetime.fromtimestamp(now, UTC) + datetime.timedelta(hours=goal["hours"])
            return [], [
                sdk.call("get_current_location"),
                sdk.call("get_current_timestamp"),
                sdk.call("shift_timestamp", timestamp=now, hours=goal["hours"]),
                sdk.call("add_reminder", content=goal["content"].capitalize(), reminder_timestamp=when.timestamp(),
                         latitude=goal["latitude"], longitude=goal["longitude"]),
            ]
        if kind == "holiday":
            day = datetime.date.fromisoformat(goal["date"])
            stamp = datetime.datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
            return [], [sdk.call("search_holiday", holiday_name=goal["spoken"], year=goal["year"]),
                        sdk.call("timestamp_to_datetime_info", timestamp=stamp)]
        return [], [sdk.calls(("add_contact", {"name": goal["name"], "phone_number": goal["phone_number"]}))]

    def _outcome(self, scenario: sdk.Scenario) -> str:
        goal = scenario.truth["goal"]
        kind = goal["kind"]
        if kind == "message":
            return f'Your message to {goal["name"]} has been sent: "{goal["content"]}".'
        if kind == "setting":
            return f"{SETTING_NAMES[goal['setting']].capitalize()} is now on."
        if kind == "location_reminder":
            when = datetime.datetime.fromtimestamp(goal["reminder_timestamp"], UTC)
            return (f"Your reminder to {goal['content']} is set for {when:%H:%M} UTC on "
                    f"{_say_date(when.date())}, pinned to your current location "
                    f"({goal['latitude']:.4f}, {goal['longitude']:.4f}).")
        if kind == "holiday":
            day = datetime.date.fromisoformat(goal["date"])
            return f"{goal['spoken']} {goal['year']} falls on {_say_date(day)}."
        return f"{goal['name']} is saved in your contacts with the number {goal['phone_number']}."

    def reference_solution(self, scenario: sdk.Scenario) -> list[sdk.Turn]:
        truth = scenario.truth
        settings = scenario.state["settings"]
        lookups, action = self._goal_turns(scenario)
        turns = list(lookups)
        radios = [name for name in truth["requires"] if name != "low_battery_mode"]
        if truth["goal"]["kind"] == "setting":
            radios = [truth["goal"]["setting"]]
        if radios:
            # Try first: the error names the missing setting. Switching it on may fail in turn because of
            # low battery mode; that error names the second-level blocker.
            if truth["goal"]["kind"] != "setting":
                turns.append(action[0])
            for radio in radios:
                turns.append(sdk.call(SETTER[radio], on=True))
                if settings["low_battery_mode"]:
                    turns.append(sdk.call("get_low_battery_mode_status"))
                    turns.append(sdk.call("set_low_battery_mode_status", on=False))
                    turns.append(sdk.call(SETTER[radio], on=True))
            if truth["goal"]["kind"] != "setting":
                turns.extend(action)
        else:
            turns.extend(action)
        summary = self._outcome(scenario)
        # Name the fixes in the order they were made: low battery mode first, then the radio it freed.
        fixes = sorted(truth["requires"], key=lambda name: name != "low_battery_mode")
        if fixes:
            words = " and ".join(
                f"turned {'on' if truth['requires'][name] else 'off'} {SETTING_NAMES[name]}" for name in fixes
            )
            summary += f" It was blocked at first, so I {words}; I left them that way."
        turns.append(sdk.say(summary))
        return turns

    def capability_skipping_solution(self, scenario: sdk.Scenario) -> list[sdk.Turn]:
        """An agent that does not diagnose settings.

        Blocked request: it tries the action, and on the error either gives up, retries the identical call,
        or flips the setting it associates with "connectivity" (wifi, or cellular when wifi is the complaint)
        and retries - then reports the failure. Unblocked request: it "prepares" the phone by reflex,
        switching the decoy setting (wifi on / low battery mode off) before doing what was asked.
        """
        truth = scenario.truth
        goal = truth["goal"]
        lookups, action = self._goal_turns(scenario)
        turns = list(lookups)
        if not truth["blocked"]:
            decoy = VARIANTS[scenario.meta["variant"]]["decoy"]
            turns.append(sdk.call(SETTER[decoy], on=decoy != "low_battery_mode"))
            turns.extend(action)
            turns.append(sdk.say(self._outcome(scenario) + f" I also set up {SETTING_NAMES[decoy]} so everything works."))
            return turns
        first = action[0]
        turns.append(first)
        style = scenario.seed % 3
        if style == 1:
            turns.append(first)  # same call again, nothing fixed
        elif style == 2:
            guess = "cellular" if goal["kind"] == "holiday" or goal.get("setting") == "wifi" else "wifi"
            turns.append(sdk.call(SETTER[guess], on=True))
            turns.append(first)
        what = {
            "message": f"send your message to {goal.get('name', '')}",
            "setting": f"turn on {SETTING_NAMES.get(goal.get('setting', ''), '')}",
            "location_reminder": "create that location reminder",
            "holiday": f"look up {goal.get('spoken', '')}",
            "contact": "save the contact",
        }[goal["kind"]]
        turns.append(sdk.say(f"Sorry, I wasn't able to {what}: the phone returned an error. "
                             "You may want to check your settings and try again later."))
        return turns


ENV = PermissionErrorRecoveryEnv
