"""Seeded ToolSandbox phones: contacts, messages, reminders and device settings in ToolSandbox's columns.

The database an env builds with :class:`PhoneWorld` is ``{"current_timestamp", "timezone", "settings",
"contacts", "messages", "reminders"}``: the settings row (``cellular``, ``wifi``, ``location_service``,
``low_battery_mode``, ``latitude``, ``longitude``) and one list of rows per ToolSandbox table. Ids are uuid4
strings drawn from the seeded rng; ids of rows the tools create derive from their content, so replays match.
"""

from __future__ import annotations

import hashlib

__all__ = [
    "AREA_CODES",
    "FIRST_NAMES",
    "LAST_NAMES",
    "PLACES",
    "PhoneWorld",
    "RELATIONSHIPS",
    "SETTINGS",
    "SETTING_NAMES",
    "SETTING_WORDS",
    "digits",
    "stable_uuid",
]

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
OLD_MESSAGE_TEXTS = (
    "See you tomorrow", "Sounds good", "Are we still on for Saturday?", "Got it, thanks",
    "Where did you park?", "Running late", "Can you send me the address?", "Ok, talk soon",
)
#: A few real spots, so coordinates look plausible.
PLACES = (
    (37.3349, -122.0090), (40.7580, -73.9855), (47.6205, -122.3493), (30.2672, -97.7431),
    (41.8827, -87.6233), (25.7617, -80.1918), (39.7392, -104.9903), (42.3601, -71.0589),
    (34.0522, -118.2437), (45.5152, -122.6784), (36.1699, -115.1398), (33.7490, -84.3880),
)
#: The switchable settings, in ToolSandbox's column names; how people name them; words that refer to them.
SETTINGS = ("low_battery_mode", "wifi", "cellular", "location_service")
SETTING_NAMES = {"low_battery_mode": "low battery mode", "wifi": "Wi-Fi", "cellular": "cellular service",
                 "location_service": "location services"}
SETTING_WORDS = {"low_battery_mode": ("low battery", "low-battery", "low power", "battery saver"),
                 "wifi": ("wifi", "wi-fi"), "cellular": ("cellular", "mobile data", "cell service"),
                 "location_service": ("location",)}


def uuid_text(hex_digits: str) -> str:
    return f"{hex_digits[:8]}-{hex_digits[8:12]}-4{hex_digits[13:16]}-a{hex_digits[17:20]}-{hex_digits[20:32]}"


def stable_uuid(*parts) -> str:
    """A uuid4-shaped id derived from content (for rows tools create: replays give the same ids)."""
    return uuid_text(hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest())


def digits(phone) -> str:
    """The digits of a phone number (``"+1 (415) 555-0100"`` -> ``"14155550100"``)."""
    return "".join(ch for ch in str(phone) if ch.isdigit())


class PhoneWorld:
    """Seeded construction of one phone: ``rng`` is the env's ``self.rng(seed)``, ``now`` a POSIX timestamp."""

    def __init__(self, rng, now: float) -> None:
        self.rng = rng
        self.now = now

    def uuid(self) -> str:
        """A uuid4-shaped id from the seeded rng."""
        return uuid_text(f"{self.rng.getrandbits(128):032x}")

    def phone_number(self) -> str:
        return f"+1{self.rng.choice(AREA_CODES)}{self.rng.randint(2000000, 9999999)}"

    def contacts(self, count: int) -> list[dict]:
        """The phone owner (``is_self``, first) and ``count - 1`` others with distinct names and relationships."""
        rng = self.rng
        firsts = rng.sample(FIRST_NAMES, count)
        lasts = rng.sample(LAST_NAMES, count)
        relations = rng.sample(RELATIONSHIPS, count - 1)
        contacts = []
        for index, (first, last) in enumerate(zip(firsts, lasts)):
            phone = self.phone_number()
            contacts.append({"person_id": self.uuid(), "name": f"{first} {last}", "phone_number": phone,
                             "relationship": "self" if index == 0 else relations[index - 1], "is_self": index == 0})
        return contacts

    def messages(self, owner: dict, others: list[dict], count: int) -> list[dict]:
        """``count`` old messages between the owner and others, oldest first."""
        rng = self.rng
        messages = []
        for _ in range(count):
            other = rng.choice(others)
            sender, recipient = (owner, other) if rng.random() < 0.5 else (other, owner)
            messages.append({
                "message_id": self.uuid(), "sender_person_id": sender["person_id"],
                "sender_phone_number": sender["phone_number"], "recipient_person_id": recipient["person_id"],
                "recipient_phone_number": recipient["phone_number"], "content": rng.choice(OLD_MESSAGE_TEXTS),
                "creation_timestamp": round(self.now - rng.uniform(0.1, 9) * 86400, 3),
            })
        messages.sort(key=lambda m: m["creation_timestamp"])
        return messages

    def reminder(self, content: str, created_days_ago: tuple = (2, 20), due_in_days: tuple = (-3, 10)) -> dict:
        """A reminder made some days ago and due some days from now (negative: already past)."""
        rng = self.rng
        return {"reminder_id": self.uuid(), "content": content,
                "creation_timestamp": round(self.now - rng.uniform(*created_days_ago) * 86400, 3),
                "reminder_timestamp": round(self.now + rng.uniform(*due_in_days) * 86400, 3),
                "latitude": None, "longitude": None}

    def state(self, settings: dict, contacts: list | None = None, messages: list | None = None,
              reminders: list | None = None) -> dict:
        """The phone's database. ``settings`` holds the four switches plus ``latitude`` and ``longitude``."""
        return {"current_timestamp": self.now, "timezone": "UTC", "settings": dict(settings),
                "contacts": list(contacts or []), "messages": list(messages or []), "reminders": list(reminders or [])}
