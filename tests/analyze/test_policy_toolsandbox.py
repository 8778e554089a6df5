"""The offline labeler on ToolSandbox trajectories (in the shape the toolsandbox target writes them): its
rules for settings, contacts, messages, reminders and dates, each in a good and a bad version."""

from __future__ import annotations

import json
from typing import Any

from factory.analyze.offline import CAPABILITIES, OfflineLabeler
from schemas.capability import CapabilityLabel
from schemas.trajectory import Trajectory

L, P, N = CapabilityLabel.LACKING, CapabilityLabel.PRESENT, CapabilityLabel.NA


def call(tool: str, result: str, error: bool = False, **arguments: Any) -> list[dict[str, Any]]:
    name = tool
    call_id = f"c{abs(hash((name, json.dumps(arguments, sort_keys=True)))) % 10**8}"
    return [
        {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]},
        {"role": "tool", "tool_call_id": call_id, "name": name, "content": result, "error": error},
    ]


def labels(user: str, *turns: Any, reward: float = 1.0) -> dict[str, tuple[CapabilityLabel, str]]:
    messages = [{"role": "system", "content": "Don't make assumptions."}, {"role": "user", "content": user}]
    for turn in turns:
        messages += turn if isinstance(turn, list) else [{"role": "assistant", "content": turn}]
    trajectory = Trajectory(id="s#0", target="toolsandbox", task_id="s", messages=messages, reward=reward, success=reward == 1.0,
                            source="rollout", metadata={"domain": "toolsandbox", "trial": 0})  # fmt: skip
    return {l.capability: (l.label, l.reason) for l in OfflineLabeler(trust={}).label(trajectory, list(CAPABILITIES))}


def test_a_setting_that_blocks_a_call_must_be_changed_and_the_call_retried() -> None:
    failed = call("send_message_with_phone_number", "ConnectionError: Cellular service is not enabled", True, phone_number="+12453344098", content="hi")
    search = call("search_contacts", "[{'name': 'Fredrik', 'phone_number': '+12453344098'}]", name="Fredrik")
    good = labels("Text Fredrik hi", search, failed, call("set_cellular_service_status", "None", on=True),
                  call("send_message_with_phone_number", "'msg-1'", phone_number="+12453344098", content="hi"), "Sent.")
    assert good["permission_error_recovery"][0] == P and good["precondition_verification"][0] == P
    gave_up = labels("Text Fredrik hi", search, failed, "Your message was sent.", reward=0.0)
    assert gave_up["permission_error_recovery"][0] == L and "never changed it" in gave_up["permission_error_recovery"][1]
    no_retry = labels("Text Fredrik hi", search, failed, call("set_cellular_service_status", "None", on=True), "Done.", reward=0.0)
    assert no_retry["permission_error_recovery"] == (L, "changed cellular but never called send_message_with_phone_number again")


def test_changing_a_setting_nobody_asked_for_is_policy_application() -> None:
    result = labels("Is my wifi on?", call("get_wifi_status", "True"), call("set_cellular_service_status", "None", on=False), "Yes.")
    assert result["precondition_verification"][0] == L and "nobody asked for" in result["precondition_verification"][1]
    asked = labels("Turn off cellular", call("set_cellular_service_status", "None", on=False), "Cellular is off.")
    assert asked["precondition_verification"][0] == P


def test_recipients_and_ids_come_from_what_was_read() -> None:
    guessed = labels("Text my boss that I'm late", call("send_message_with_phone_number", "'m'", phone_number="+15550001111", content="late"), "Sent.")
    assert guessed["precondition_verification"][0] == L and "+15550001111" in guessed["precondition_verification"][1]
    looked_up = labels("Text my boss that I'm late", call("search_contacts", "[{'phone_number': '+1 555 000 1111'}]", relationship="boss"),
                       call("send_message_with_phone_number", "'m'", phone_number="+15550001111", content="late"), "Sent.")  # fmt: skip
    assert looked_up["precondition_verification"][0] == P
    invented = labels("Remove my reminder", call("remove_reminder", "None", reminder_id="abc-123"), "Removed.")
    assert invented["precondition_verification"][0] == L


def test_relative_times_need_the_current_time_and_holidays_a_search() -> None:
    add = call("add_reminder", "'r-1'", content="buy milk", reminder_timestamp=1795712400.0)
    blind = labels("Remind me to buy milk tomorrow at 5PM", add, "Done.")
    assert blind["datetime_reasoning"][0] == L
    read = labels("Remind me to buy milk tomorrow at 5PM", call("get_current_timestamp", "1795601458.1"), add, "Done.")
    assert read["datetime_reasoning"][0] == P
    absolute = labels("Remind me to buy milk on March 22 2024 at 5PM", add, "Done.")
    assert absolute["datetime_reasoning"][0] == N
    guessed = labels("How many days till Christmas?", "It is 29 days till Christmas Day.")
    assert guessed["datetime_reasoning"][0] == L
    searched = labels("How many days till Christmas?", call("search_holiday", "1798156800.0", holiday_name="Christmas Day"), "29 days.")
    assert searched["datetime_reasoning"][0] == P


def test_a_tool_the_scenario_does_not_offer_is_tool_calling_precision() -> None:
    result = labels("Remove +12453344098 from my contacts",
                    call("remove_contact", "KeyError: \"tool 'remove_contact' is not available\"", True, person_id="x"), "Sorry.")  # fmt: skip
    assert result["tool_calling_precision"][0] == L
