"""ToolSandbox's offline phone tools: settings, contacts, messages, reminders and the time utilities.

Faithful to ToolSandbox where it matters for an agent: the settings depend on one another and the tools
enforce it (texting needs cellular, the current location needs location services, the holiday lookup is an
online service that needs wifi, low battery mode keeps the radios off and switching it on turns them off),
errors carry ToolSandbox's exception names (``PermissionError: ...``, ``ConnectionError: ...``), phone
numbers must be in international form, and name search is fuzzy. Deliberate differences, documented:
the clock is the scenario's (``current_timestamp``) and every time tool works in UTC; fuzzy matching is a
word-prefix match rather than rapidfuzz; holidays come by rule; unit conversion knows a fixed table.
The RapidAPI tools (network) and ``calculate_lat_lon_distance`` are not provided.

Mixins group the tools as ToolSandbox's modules do (:class:`SettingTools`, :class:`ContactTools`,
:class:`MessagingTools`, :class:`ReminderTools`, :class:`UtilityTools`); :class:`PhoneTools` has them all.
"""

from __future__ import annotations

import datetime
import math
import re

from trace_env import sdk
from trace_env.kits.text import fuzzy
from trace_env.kits.toolsandbox.dates import UTC, find_holiday, midnight, us_holidays
from trace_env.kits.toolsandbox.world import stable_uuid
from trace_env.sdk import ToolError

__all__ = [
    "ContactTools",
    "LOW_BATTERY_REFUSAL",
    "MessagingTools",
    "PhoneTools",
    "ReminderTools",
    "SETTER",
    "SettingTools",
    "UNITS",
    "UtilityTools",
]

#: The tool that switches each setting.
SETTER = {"low_battery_mode": "set_low_battery_mode_status", "wifi": "set_wifi_status",
          "cellular": "set_cellular_service_status", "location_service": "set_location_service_status"}
#: What a radio says when low battery mode stops it switching on.
LOW_BATTERY_REFUSAL = {
    "wifi": "Wifi cannot be turned on in low battery mode",
    "cellular": "Cellular service cannot be turned on in low battery mode",
    "location_service": "Location service cannot be turned on in low battery mode",
}
#: unit -> (dimension, factor to the dimension's base unit); temperatures are handled apart.
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
TEMPERATURES = ("celsius", "fahrenheit", "kelvin")


# --- checks ToolSandbox's validators make ---------------------------------------------------------
def check_phone(phone_number: str) -> None:
    """ToolSandbox parses numbers with ``phonenumbers`` and no default region: the "+" form is required."""
    if not re.fullmatch(r"\+\d{7,15}", re.sub(r"[\s\-().]", "", phone_number)):
        raise ToolError(f"(0) Missing or invalid default region. ({phone_number!r})", exception="NumberParseException")


def check_timestamp(value: float, name: str) -> datetime.datetime:
    if not math.isfinite(value):
        raise ToolError(f"{name} must be a finite POSIX timestamp", exception="ValueError")
    try:
        return datetime.datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        raise ToolError(f"{name}={value} is outside the supported date range", exception="ValueError") from None


def check_coordinates(latitude, longitude) -> None:
    if latitude is not None and not -90 <= latitude <= 90:
        raise ToolError(f"latitude {latitude} is outside [-90, 90]", exception="ValueError")
    if longitude is not None and not -180 <= longitude <= 180:
        raise ToolError(f"longitude {longitude} is outside [-180, 180]", exception="ValueError")


def in_bounds(row: dict, bounds) -> bool:
    return not any((low is not None and row[key] < low) or (high is not None and row[key] > high)
                   for key, low, high in bounds)


def no_entry(key: str, value: str) -> ToolError:
    return ToolError(f"No db entry matching {key}='{value}' found", exception="NoDataError")


class SettingTools:
    """Device settings and the current location."""

    @staticmethod
    def switch_setting(db, setting: str, on: bool) -> None:
        settings = db["settings"]
        if on and setting != "low_battery_mode" and settings["low_battery_mode"]:
            raise ToolError(LOW_BATTERY_REFUSAL[setting], exception="PermissionError")
        if bool(settings[setting]) == on:
            raise ToolError(f"{setting} already {'enabled' if on else 'disabled'}", exception="ValueError")
        settings[setting] = on
        if setting == "low_battery_mode" and on:  # low battery mode switches its dependents off
            for radio in ("cellular", "wifi", "location_service"):
                settings[radio] = False

    @sdk.tool
    def get_low_battery_mode_status(self, db) -> bool:
        return bool(db["settings"]["low_battery_mode"])

    @sdk.tool
    def get_wifi_status(self, db) -> bool:
        return bool(db["settings"]["wifi"])

    @sdk.tool
    def get_cellular_service_status(self, db) -> bool:
        return bool(db["settings"]["cellular"])

    @sdk.tool
    def get_location_service_status(self, db) -> bool:
        return bool(db["settings"]["location_service"])

    @sdk.tool
    def set_low_battery_mode_status(self, db, on: bool) -> None:
        SettingTools.switch_setting(db, "low_battery_mode", on)

    @sdk.tool
    def set_wifi_status(self, db, on: bool) -> None:
        SettingTools.switch_setting(db, "wifi", on)

    @sdk.tool
    def set_cellular_service_status(self, db, on: bool) -> None:
        SettingTools.switch_setting(db, "cellular", on)

    @sdk.tool
    def set_location_service_status(self, db, on: bool) -> None:
        SettingTools.switch_setting(db, "location_service", on)

    @sdk.tool
    def get_current_location(self, db) -> dict:
        if not db["settings"]["location_service"]:
            raise ToolError("Location service is not enabled.", exception="PermissionError")
        return {"latitude": db["settings"]["latitude"], "longitude": db["settings"]["longitude"]}


class ContactTools:
    """The contact book: name and relationship match fuzzily, ids and numbers exactly."""

    @sdk.tool
    def search_contacts(self, db, person_id: str = None, name: str = None, phone_number: str = None,
                        relationship: str = None, is_self: bool = None) -> list:
        if phone_number is not None:
            check_phone(phone_number)
        found = []
        for contact in db["contacts"]:
            if (person_id is not None and contact["person_id"] != person_id) or (
                    phone_number is not None and contact["phone_number"] != phone_number) or (
                    is_self is not None and contact["is_self"] != is_self):
                continue
            if (name is not None and not fuzzy(name, contact["name"])) or (
                    relationship is not None and not fuzzy(relationship, contact["relationship"] or "")):
                continue
            found.append(dict(contact))
        return found

    @sdk.tool
    def add_contact(self, db, name: str, phone_number: str, relationship: str = None, is_self: bool = False) -> str:
        check_phone(phone_number)
        if is_self and any(c["is_self"] for c in db["contacts"]):
            raise ToolError("Self entry already exists. Cannot add another one.", exception="DuplicateError")
        person_id = stable_uuid("contact", len(db["contacts"]), name, phone_number)
        db["contacts"].append({"person_id": person_id, "name": name, "phone_number": phone_number,
                               "relationship": relationship, "is_self": is_self})
        return person_id

    @sdk.tool
    def modify_contact(self, db, person_id: str, name: str = None, phone_number: str = None,
                       relationship: str = None, is_self: bool = None) -> None:
        updates = {"name": name, "phone_number": phone_number, "relationship": relationship, "is_self": is_self}
        updates = {key: value for key, value in updates.items() if value is not None}
        if not updates:
            raise ToolError("No update information given. At least one new field should be provided among "
                            "[name, phone_number, relationship, is_self] in order to modify contact",
                            exception="ValueError")
        if phone_number is not None:
            check_phone(phone_number)
        if is_self and any(c["is_self"] and c["person_id"] != person_id for c in db["contacts"]):
            raise ToolError("Self entry already exists. Cannot add another one.", exception="DuplicateError")
        for contact in db["contacts"]:
            if contact["person_id"] == person_id:
                contact.update(updates)
                return None
        raise no_entry("person_id", person_id)

    @sdk.tool
    def remove_contact(self, db, person_id: str) -> None:
        kept = [c for c in db["contacts"] if c["person_id"] != person_id]
        if len(kept) == len(db["contacts"]):
            raise no_entry("person_id", person_id)
        db["contacts"] = kept


class MessagingTools:
    """Text messages: sending needs cellular service and exactly one ``is_self`` contact."""

    @sdk.tool
    def search_messages(self, db, message_id: str = None, sender_person_id: str = None,
                        sender_phone_number: str = None, recipient_person_id: str = None,
                        recipient_phone_number: str = None, content: str = None,
                        creation_timestamp_lowerbound: float = None, creation_timestamp_upperbound: float = None) -> list:
        for phone in (sender_phone_number, recipient_phone_number):
            if phone is not None:
                check_phone(phone)
        exact = {"message_id": message_id, "sender_person_id": sender_person_id,
                 "sender_phone_number": sender_phone_number, "recipient_person_id": recipient_person_id,
                 "recipient_phone_number": recipient_phone_number}
        bounds = [("creation_timestamp", creation_timestamp_lowerbound, creation_timestamp_upperbound)]
        return [dict(m) for m in db["messages"]
                if not any(value is not None and m[key] != value for key, value in exact.items())
                and (content is None or fuzzy(content, m["content"], every_word=False)) and in_bounds(m, bounds)]

    @sdk.tool
    def send_message_with_phone_number(self, db, phone_number: str, content: str) -> str:
        check_phone(phone_number)
        if not db["settings"]["cellular"]:
            raise ToolError("Cellular service is not enabled", exception="ConnectionError")
        owners = [c for c in db["contacts"] if c["is_self"]]
        if len(owners) != 1:
            raise ToolError(f"1 and only 1 self entry should exist in contacts database, instead found {len(owners)}",
                            exception="DuplicateError")
        recipient = next((c for c in db["contacts"] if c["phone_number"] == phone_number), None)
        message_id = stable_uuid("message", len(db["messages"]), phone_number, content)
        db["messages"].append({
            "message_id": message_id, "sender_person_id": owners[0]["person_id"],
            "sender_phone_number": owners[0]["phone_number"],
            "recipient_person_id": recipient["person_id"] if recipient else None,
            "recipient_phone_number": phone_number, "content": content,
            "creation_timestamp": float(db["current_timestamp"]),
        })
        return message_id


class ReminderTools:
    """Reminders, optionally pinned to a place; content matches fuzzily (any shared word of 3+ letters)."""

    @sdk.tool
    def add_reminder(self, db, content: str, reminder_timestamp: float, latitude: float = None,
                     longitude: float = None) -> str:
        check_timestamp(reminder_timestamp, "reminder_timestamp")
        check_coordinates(latitude, longitude)
        reminder_id = stable_uuid("reminder", len(db["reminders"]), content, reminder_timestamp)
        db["reminders"].append({"reminder_id": reminder_id, "content": content,
                                "creation_timestamp": float(db["current_timestamp"]),
                                "reminder_timestamp": reminder_timestamp, "latitude": latitude, "longitude": longitude})
        return reminder_id

    @sdk.tool
    def search_reminder(self, db, reminder_id: str = None, content: str = None,
                        creation_timestamp_lowerbound: float = None, creation_timestamp_upperbound: float = None,
                        reminder_timestamp_lowerbound: float = None, reminder_timestamp_upperbound: float = None,
                        latitude: float = None, longitude: float = None) -> list:
        bounds = [("creation_timestamp", creation_timestamp_lowerbound, creation_timestamp_upperbound),
                  ("reminder_timestamp", reminder_timestamp_lowerbound, reminder_timestamp_upperbound)]
        exact = {"reminder_id": reminder_id, "latitude": latitude, "longitude": longitude}
        return [dict(r) for r in db["reminders"]
                if not any(value is not None and r[key] != value for key, value in exact.items())
                and (content is None or fuzzy(content, r["content"], every_word=False)) and in_bounds(r, bounds)]

    @sdk.tool
    def modify_reminder(self, db, reminder_id: str, content: str = None, reminder_timestamp: float = None,
                        latitude: float = None, longitude: float = None) -> None:
        updates = {"content": content, "reminder_timestamp": reminder_timestamp, "latitude": latitude,
                   "longitude": longitude}
        updates = {key: value for key, value in updates.items() if value is not None}
        if not updates:
            raise ToolError("No update information given. At least one new field should be provided among "
                            "[content, reminder_timestamp, latitude, longitude] in order to modify reminder",
                            exception="ValueError")
        if reminder_timestamp is not None:
            check_timestamp(reminder_timestamp, "reminder_timestamp")
        check_coordinates(latitude, longitude)
        for reminder in db["reminders"]:
            if reminder["reminder_id"] == reminder_id:
                reminder.update(updates, creation_timestamp=float(db["current_timestamp"]))
                return None
        raise no_entry("reminder_id", reminder_id)

    @sdk.tool
    def remove_reminder(self, db, reminder_id: str) -> None:
        kept = [r for r in db["reminders"] if r["reminder_id"] != reminder_id]
        if len(kept) == len(db["reminders"]):
            raise no_entry("reminder_id", reminder_id)
        db["reminders"] = kept


def unit(name: str) -> str:
    key = name.strip().lower().replace("degrees ", "").replace("degree ", "")
    key = UNIT_ALIASES.get(key, key)
    if key not in UNITS and key not in TEMPERATURES and key.endswith("s"):
        key = UNIT_ALIASES.get(key[:-1], key[:-1])
    if key not in UNITS and key not in TEMPERATURES:
        raise ToolError(f"'{name}' is not defined in the unit registry", exception="UndefinedUnitError")
    return key


class UtilityTools:
    """The device clock (the scenario's ``current_timestamp``), UTC timestamp arithmetic, holidays, units."""

    @sdk.tool
    def get_current_timestamp(self, db) -> float:
        return float(db["current_timestamp"])

    @sdk.tool
    def timestamp_to_datetime_info(self, db, timestamp: float) -> dict:
        moment = check_timestamp(timestamp, "timestamp")
        return {"year": moment.year, "month": moment.month, "day": moment.day, "hour": moment.hour,
                "minute": moment.minute, "second": moment.second, "isoweekday": moment.isoweekday(), "timezone": "UTC"}

    @sdk.tool
    def datetime_info_to_timestamp(self, db, year: int, month: int, day: int, hour: int, minute: int,
                                   second: int) -> float:
        try:
            return datetime.datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()
        except (ValueError, OverflowError) as exc:
            raise ToolError(f"{exc}", exception="ValueError") from None

    @sdk.tool
    def shift_timestamp(self, db, timestamp: float, weeks: int = 0, days: int = 0, hours: int = 0, minutes: int = 0,
                        seconds: int = 0) -> float:
        moment = check_timestamp(timestamp, "timestamp")
        try:
            shifted = moment + datetime.timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
        except OverflowError:
            raise ToolError("date value out of range", exception="OverflowError") from None
        return shifted.timestamp()

    @sdk.tool
    def timestamp_diff(self, db, timestamp_0: float, timestamp_1: float) -> dict:
        delta = check_timestamp(timestamp_1, "timestamp_1") - check_timestamp(timestamp_0, "timestamp_0")
        return {"days": delta.days, "seconds": delta.seconds}

    @sdk.tool
    def seconds_to_hours_minutes_seconds(self, db, seconds: float) -> dict:
        """As in ToolSandbox the count is read as a time of day after 0:00, so it wraps at 24 hours."""
        moment = check_timestamp(seconds, "seconds")
        return {"hour": moment.hour, "minute": moment.minute, "second": moment.second}

    @sdk.tool
    def search_holiday(self, db, holiday_name: str, year: int = None):
        """A US holiday's date as a midnight-UTC timestamp; None when no holiday matches. Needs wifi."""
        if not db["settings"]["wifi"]:
            raise ToolError("Wifi is not enabled", exception="ConnectionError")
        if year is None:
            year = datetime.datetime.fromtimestamp(float(db["current_timestamp"]), UTC).year
        if not 1 <= year <= 9998:
            raise ToolError(f"year {year} is out of range", exception="ValueError")
        canonical = find_holiday(holiday_name)
        return None if canonical is None else midnight(us_holidays(year)[canonical])

    @sdk.tool
    def unit_conversion(self, db, amount: float, from_unit: str, to_unit: str) -> float:
        source, target = unit(from_unit), unit(to_unit)
        if source in TEMPERATURES and target in TEMPERATURES:
            kelvin = {"celsius": amount + 273.15, "fahrenheit": (amount - 32) * 5 / 9 + 273.15, "kelvin": amount}[source]
            return {"celsius": kelvin - 273.15, "fahrenheit": (kelvin - 273.15) * 9 / 5 + 32, "kelvin": kelvin}[target]
        source_dim = "temperature" if source in TEMPERATURES else UNITS[source][0]
        target_dim = "temperature" if target in TEMPERATURES else UNITS[target][0]
        if source_dim != target_dim:
            raise ToolError(f"Cannot convert from '{from_unit}' ([{source_dim}]) to '{to_unit}' ([{target_dim}])",
                            exception="DimensionalityError")
        return amount * UNITS[source][1] / UNITS[target][1]


class PhoneTools(SettingTools, ContactTools, MessagingTools, ReminderTools, UtilityTools):
    """Every offline ToolSandbox tool, for an env to inherit and expose a subset of in ``tool_names``."""
