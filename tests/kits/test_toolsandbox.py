"""The ToolSandbox phone kit: setting dependencies, contacts, messages, reminders, time tools, holidays."""

from __future__ import annotations

import datetime
import json
import random

import pytest

from factory.validation.static import check_source
from trace_env.engine import EpisodeRunner
from trace_env.kits import toolsandbox as phone
from trace_env.loader import load_env
from trace_env.sdk import call, calls

ENV = '''
from trace_env import sdk
from trace_env.kits import toolsandbox as phone


class Phone(phone.PhoneTools, sdk.TaskEnv):
    capability = "phone_kit"
    target = "toolsandbox"
    tool_names = ["search_contacts", "add_contact", "modify_contact", "remove_contact", "send_message_with_phone_number",
                  "search_messages", "add_reminder", "search_reminder", "modify_reminder", "remove_reminder",
                  "get_low_battery_mode_status", "set_low_battery_mode_status", "set_wifi_status",
                  "set_cellular_service_status", "get_current_location", "get_current_timestamp",
                  "timestamp_to_datetime_info", "shift_timestamp", "timestamp_diff", "search_holiday", "unit_conversion"]

    def generate(self, seed):
        rng = self.rng(seed)
        world = phone.PhoneWorld(rng, 1900000000.5)
        contacts = world.contacts(5)
        settings = {"low_battery_mode": True, "wifi": False, "cellular": False, "location_service": False,
                    "latitude": 37.33, "longitude": -122.0}
        state = world.state(settings, contacts, world.messages(contacts[0], contacts[1:], 3),
                            [world.reminder("Renew passport")])
        return sdk.Scenario(seed=seed, state=state, user={}, truth={})

    def system_prompt(self, scenario):
        return "You are a phone assistant."

    def first_user_message(self, scenario):
        return "Text my boss."
'''


@pytest.fixture(scope="module")
def env():
    assert check_source(ENV) == []
    return load_env(ENV)


def observe(runner: EpisodeRunner, turn) -> str:
    return runner.step(turn).observation.split("] ", 1)[1]


def test_settings_block_one_another_with_toolsandbox_errors(env) -> None:
    runner = EpisodeRunner(env)
    runner.reset(1)
    owner = next(c for c in runner.episode.state["contacts"] if c["is_self"])
    other = next(c for c in runner.episode.state["contacts"] if not c["is_self"])
    send = call("send_message_with_phone_number", phone_number=other["phone_number"], content="Running late")
    assert observe(runner, send) == "ConnectionError: Cellular service is not enabled"
    assert observe(runner, call("set_cellular_service_status", on=True)) == (
        "PermissionError: Cellular service cannot be turned on in low battery mode")
    assert observe(runner, call("get_current_location")) == "PermissionError: Location service is not enabled."
    assert observe(runner, call("search_holiday", holiday_name="Labor Day")) == "ConnectionError: Wifi is not enabled"
    assert observe(runner, call("set_low_battery_mode_status", on=False)) == "null"
    assert observe(runner, call("set_low_battery_mode_status", on=False)) == "ValueError: low_battery_mode already disabled"
    assert observe(runner, call("set_cellular_service_status", on=True)) == "null"
    message_id = observe(runner, send)  # a string result is shown as is
    sent = runner.episode.state["messages"][-1]
    assert sent["message_id"] == message_id and sent["sender_person_id"] == owner["person_id"]
    assert sent["recipient_person_id"] == other["person_id"] and sent["creation_timestamp"] == 1900000000.5
    assert observe(runner, call("set_wifi_status", on=True)) == "null"
    runner.episode.state["settings"]["location_service"] = True
    assert observe(runner, call("set_low_battery_mode_status", on=True)) == "null"  # and the radios go off
    assert not any(runner.episode.state["settings"][s] for s in ("wifi", "cellular", "location_service"))


def test_contacts_and_messages_search_like_toolsandbox(env) -> None:
    runner = EpisodeRunner(env)
    runner.reset(2)
    contacts = runner.episode.state["contacts"]
    someone = contacts[2]
    first = someone["name"].split()[0]
    found = json.loads(observe(runner, calls(("search_contacts", {"name": first.lower()[:3]}))))
    assert someone in found  # a prefix of the first name, any case
    by_relation = json.loads(observe(runner, call("search_contacts", relationship=someone["relationship"].upper())))
    assert by_relation == [someone]
    assert observe(runner, call("search_contacts", phone_number="555-0100")).startswith("NumberParseException")
    new_id = observe(runner, calls(("add_contact", {"name": "Dana Fox", "phone_number": "+14155550100"})))
    assert observe(runner, calls(("add_contact", {"name": "Me Again", "phone_number": "+14155550101",
                                                  "is_self": True}))).startswith("DuplicateError")
    assert observe(runner, call("modify_contact", person_id=new_id, relationship="plumber")) == "null"
    assert json.loads(observe(runner, call("search_contacts", relationship="plumber")))[0]["person_id"] == new_id
    assert observe(runner, call("modify_contact", person_id=new_id)).startswith("ValueError: No update information")
    assert observe(runner, call("remove_contact", person_id=new_id)) == "null"
    assert observe(runner, call("remove_contact", person_id=new_id)) == f"NoDataError: No db entry matching person_id='{new_id}' found"
    old = runner.episode.state["messages"][0]
    assert json.loads(observe(runner, call("search_messages", message_id=old["message_id"]))) == [old]


def test_reminders_and_time_tools_in_utc(env) -> None:
    runner = EpisodeRunner(env)
    runner.reset(3)
    now = json.loads(observe(runner, call("get_current_timestamp")))
    info = json.loads(observe(runner, call("timestamp_to_datetime_info", timestamp=now)))
    moment = datetime.datetime.fromtimestamp(now, datetime.timezone.utc)
    assert (info["year"], info["month"], info["day"], info["hour"], info["timezone"]) == (
        moment.year, moment.month, moment.day, moment.hour, "UTC")
    later = json.loads(observe(runner, call("shift_timestamp", timestamp=now, days=1, hours=2)))
    assert later - now == 26 * 3600
    assert json.loads(observe(runner, call("timestamp_diff", timestamp_0=now, timestamp_1=later))) == {"days": 1, "seconds": 7200}
    rid = observe(runner, call("add_reminder", content="Call the landlord", reminder_timestamp=later))
    assert [r["reminder_id"] for r in json.loads(observe(runner, call("search_reminder", content="landlord")))] == [rid]
    assert observe(runner, call("add_reminder", content="x", reminder_timestamp=later, latitude=91.0)).startswith("ValueError")
    assert observe(runner, call("modify_reminder", reminder_id=rid, content="Call the plumber")) == "null"
    assert observe(runner, call("remove_reminder", reminder_id="nope")).startswith("NoDataError")
    assert json.loads(observe(runner, call("unit_conversion", amount=100.0, from_unit="celsius", to_unit="fahrenheit"))) == 212.0
    assert json.loads(observe(runner, call("unit_conversion", amount=1.0, from_unit="mi", to_unit="km"))) == 1.609344
    assert observe(runner, call("unit_conversion", amount=1.0, from_unit="kg", to_unit="meter")).startswith("DimensionalityError")


HOLIDAYS = {  # checked against a calendar
    ("Thanksgiving", 2025): "2025-11-27", ("Thanksgiving", 2028): "2028-11-23", ("Memorial Day", 2025): "2025-05-26",
    ("Memorial Day", 2027): "2027-05-31", ("Labor Day", 2025): "2025-09-01", ("MLK Day", 2025): "2025-01-20",
    ("Presidents' Day", 2026): "2026-02-16", ("Columbus Day", 2025): "2025-10-13", ("4th of July", 2027): "2027-07-04",
    ("Christmas", 2031): "2031-12-25", ("Juneteenth", 2030): "2030-06-19", ("Veterans Day", 2029): "2029-11-11",
}


def test_holidays_follow_the_us_rules() -> None:
    for (name, year), iso in HOLIDAYS.items():
        assert phone.us_holidays(year)[phone.find_holiday(name)].isoformat() == iso, (name, year)
    assert phone.find_holiday("Festivus") is None


def test_reading_dates_times_and_durations() -> None:
    day = datetime.date(2029, 6, 3)
    for text in ("It's on June 3rd.", "3 June", "2029-06-03", "6/3/29", "Sunday, June 3, 2029"):
        assert phone.mentions_date(text, day), text
    assert not phone.mentions_date("June 3, 2024", day) and not phone.mentions_date("June 30", day)
    assert phone.say_date(day) == "Sunday, June 3, 2029"
    assert all(phone.mentions_time(t, 17, 0) for t in ("at 5pm", "17:00", "5:00 PM", "5 o'clock"))
    assert phone.mentions_time("noon", 12, 0) and not phone.mentions_time("5am", 17, 0)
    assert phone.durations("4 hours and 7 minutes, or 1,200 days", "hour") == {4}
    assert phone.durations("4 hours and 7 minutes, or 1,200 days", "day") == {1200}


def test_worlds_are_seeded_and_uuid_shaped() -> None:
    def build(seed):
        world = phone.PhoneWorld(random.Random(seed), 1.8e9)
        contacts = world.contacts(6)
        return world.state({}, contacts, world.messages(contacts[0], contacts[1:], 4), [world.reminder("x")])

    assert build(4) == build(4) and build(4) != build(5)
    state = build(4)
    ids = [c["person_id"] for c in state["contacts"]] + [m["message_id"] for m in state["messages"]]
    assert all(len(i) == 36 and i[14] == "4" and i.count("-") == 4 for i in ids) and len(set(ids)) == len(ids)
    assert [c["is_self"] for c in state["contacts"]] == [True] + [False] * 5
    stamps = [m["creation_timestamp"] for m in state["messages"]]
    assert stamps == sorted(stamps) and max(stamps) < 1.8e9
    assert phone.digits("+1 (415) 555-0100") == "14155550100"
