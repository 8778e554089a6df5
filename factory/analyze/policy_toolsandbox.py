"""ToolSandbox: the agent's use of the phone's tools judged offline, on the trajectory alone.

ToolSandbox's tools have implicit state dependencies (sending a message needs cellular service, a holiday
search needs wifi, wifi cannot come on in low battery mode), take ids the agent must read first (contacts,
reminders), and take timestamps the agent must work out from the current time. Each rule below reads only
the calls, their results (``error`` is ToolSandbox's exception flag) and what the user said, never the
similarity or the milestones (the labeler is blind):

- permission_error_recovery: after a call fails because a setting is off (or low battery mode is on), the
  agent changes that setting and calls the tool again (PRESENT), or never does (LACKING); telling the user a
  failed change was made is LACKING.
- policy_application: a setting changed that neither the user named nor a failed call needed is LACKING
  (ToolSandbox's milestones forbid changing state nobody asked for); settings changed for one of those
  reasons are PRESENT.
- precondition_verification: a message sent to a phone number, or a contact or reminder changed by an id,
  that neither the user nor an earlier tool result had given is LACKING (a guessed recipient or id); such a
  write on a value read first is PRESENT.
- datetime_reasoning: a reminder timestamp (or a timestamp bound of a search) for a request worded in
  relative time (tomorrow, next week, a weekday, in N days) set without first reading the current time is
  LACKING; a days-until-a-holiday answer without searching the holiday is LACKING; PRESENT when it read them.
- tool_calling_precision: a call of a tool the scenario does not offer is LACKING (ToolSandbox's insufficient
  information scenarios hold tools back on purpose).
"""

from __future__ import annotations

import re
from typing import Any

from factory.analyze.calls import AgentCall
from factory.analyze.evidence import LACKING, PRESENT, Evidence

SETTINGS = {
    "cellular": ("set_cellular_service_status", re.compile(r"cellular", re.I)),
    "wifi": ("set_wifi_status", re.compile(r"wi-?fi", re.I)),
    "location_service": ("set_location_service_status", re.compile(r"location service", re.I)),
    "low_battery_mode": ("set_low_battery_mode_status", re.compile(r"low battery", re.I)),
}
SETTER = {tool: setting for setting, (tool, _) in SETTINGS.items()}
_NOT_ENABLED = re.compile(r"(not enabled|cannot be turned on in low battery mode|low battery mode)", re.I)
_UNAVAILABLE = re.compile(r"is not (a known )?(available|allowed)|not a known allowed tool|is not defined", re.I)
_RELATIVE = re.compile(r"\b(today|tonight|tomorrow|yesterday|next|last|this (morning|afternoon|evening|week|month|year|weekend)|"
                       r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|in \d+ (days?|weeks?|hours?|minutes?)|"
                       r"ago|upcoming|latest|recent)\b", re.I)  # fmt: skip
_HOLIDAY = re.compile(r"\b(christmas|thanksgiving|new year|independence day|halloween|easter|labor day|memorial day|"
                      r"valentine|holiday)\b", re.I)  # fmt: skip
_DAYS_ANSWER = re.compile(r"\b\d+\s+days?\b", re.I)
_DONE = re.compile(r"\b(sent|added|removed|deleted|updated|modified|changed|created|set|turned (on|off)|scheduled)\b", re.I)
_NOT = re.compile(r"\b(not|unable|couldn'?t|could not|failed|cannot|can'?t)\b", re.I)
TIME_READERS = {"get_current_timestamp"}
TIMESTAMP_KEYS = ("reminder_timestamp", "creation_timestamp_lowerbound", "creation_timestamp_upperbound",
                  "reminder_timestamp_lowerbound", "reminder_timestamp_upperbound")  # fmt: skip
ID_WRITES = {"remove_contact": "person_id", "modify_contact": "person_id", "remove_reminder": "reminder_id", "modify_reminder": "reminder_id"}
PRE, POLICY, RECOVERY, DATES, PRECISION = (
    "precondition_verification", "policy_application", "permission_error_recovery", "datetime_reasoning", "tool_calling_precision",
)  # fmt: skip


def _user_text(ev: Evidence) -> str:
    return "\n".join(u.text for u in ev.said if u.role == "user")


def _seen_before(ev: Evidence, value: Any, message_index: int) -> bool:
    """Whether the user or a tool result had shown a value before the message that uses it."""
    wanted = re.sub(r"\s+", "", str(value)).lower()
    if not wanted:
        return False
    for message in ev.trajectory.messages[:message_index]:
        if message.role in ("user", "tool") and wanted in re.sub(r"\s+", "", message.content or "").lower():
            return True
    return False


def _blocking_setting(call: AgentCall) -> str | None:
    """The setting a failed call's error names as off (or low battery mode as on), if any."""
    text = call.result or ""
    if not call.error or not _NOT_ENABLED.search(text):
        return None
    if re.search(r"low battery mode", text, re.I):
        return "low_battery_mode"
    return next((name for name, (_, pattern) in SETTINGS.items() if pattern.search(text)), None)


def judge_settings(ev: Evidence) -> None:
    """permission_error_recovery and policy_application on the settings tools."""
    needed: set[str] = set()
    for call in ev.calls:
        setting = _blocking_setting(call)
        if setting is None:
            continue
        needed.add(setting)
        fixed = any(SETTER.get(c.name) == setting and c.succeeded and c.position > call.position for c in ev.calls)
        retried = any(c.name == call.name and c.succeeded and c.position > call.position for c in ev.calls)
        if not fixed:
            ev.add(RECOVERY, LACKING, f"{call.name} failed because {setting.replace('_', ' ')} blocked it, and the agent never changed it")
        elif not retried:
            ev.add(RECOVERY, LACKING, f"changed {setting.replace('_', ' ')} but never called {call.name} again")
        else:
            ev.add(RECOVERY, PRESENT, f"changed {setting.replace('_', ' ')} and retried {call.name}")
    asked = _user_text(ev)
    for call in ev.calls:
        setting = SETTER.get(call.name)
        if setting is None or not call.succeeded:
            continue
        if setting in needed or SETTINGS[setting][1].search(asked) or (setting == "low_battery_mode" and needed):
            ev.add(POLICY, PRESENT, f"{call.name} was asked for or needed")
        else:
            ev.add(POLICY, LACKING, f"{call.name}({call.raw_arguments[:30]}) changed a setting nobody asked for or needed")


def judge_claims(ev: Evidence) -> None:
    """A failed write followed by a message telling the user it was done, with no successful retry."""
    for call in ev.calls:
        if not call.error or not ev.catalog.is_write(call.name) or call.result_index is None:
            continue
        if any(c.name == call.name and c.succeeded and c.position > call.position for c in ev.calls):
            continue
        reply = next((u for u in ev.said if u.role == "assistant" and u.index > call.result_index), None)
        if reply is not None and _DONE.search(reply.text) and not _NOT.search(reply.text):
            ev.add(RECOVERY, LACKING, f"told the user {reply.text.strip()[:50]!r} after {call.name} failed")
            return


def judge_values(ev: Evidence) -> None:
    """precondition_verification: recipients and ids come from what was read or said, not from a guess."""
    for call in ev.calls:
        if call.arguments is None:
            continue
        if call.name == "send_message_with_phone_number" and call.arguments.get("phone_number"):
            number = str(call.arguments["phone_number"])
            digits = re.sub(r"\D", "", number)
            if _seen_before(ev, number, call.message_index) or (len(digits) >= 7 and _seen_before(ev, digits, call.message_index)):
                ev.add(PRE, PRESENT, "messaged a number it had been given or had looked up")
            else:
                ev.add(PRE, LACKING, f"sent a message to {number}, a number nobody had given and no search had returned")
        key = ID_WRITES.get(call.name)
        if key and call.arguments.get(key):
            if _seen_before(ev, call.arguments[key], call.message_index):
                ev.add(PRE, PRESENT, f"{call.name} on an id it had read")
            else:
                ev.add(PRE, LACKING, f"{call.name} on {key} {str(call.arguments[key])[:40]!r}, which nothing had shown")


def judge_dates(ev: Evidence) -> None:
    """datetime_reasoning: relative times resolved from the current time, holidays searched."""
    asked = _user_text(ev)
    for call in ev.calls:
        if call.arguments is None or not any(k in call.arguments for k in TIMESTAMP_KEYS):
            continue
        if not _RELATIVE.search(asked):
            continue
        read = any(c.name in TIME_READERS and c.succeeded and c.position < call.position for c in ev.calls)
        if read:
            ev.add(DATES, PRESENT, f"read the current time before {call.name}")
        else:
            ev.add(DATES, LACKING, f"{call.name} with a timestamp for a relative time, without reading the current time")
    if _HOLIDAY.search(asked):
        answer = next((u for u in reversed(ev.said) if u.role == "assistant" and _DAYS_ANSWER.search(u.text)), None)
        if answer is not None:
            searched = any(c.name == "search_holiday" and c.succeeded for c in ev.calls)
            ev.add(DATES, PRESENT if searched else LACKING,
                   "looked the holiday up" if searched else f"answered {answer.text.strip()[:40]!r} without searching the holiday")  # fmt: skip


def judge_tools(ev: Evidence) -> None:
    """tool_calling_precision: calls of tools the scenario does not offer."""
    for call in ev.calls:
        if call.error and _UNAVAILABLE.search(call.result or ""):
            ev.add(PRECISION, LACKING, f"called {call.name}, a tool this scenario does not offer")
            return


def judge(ev: Evidence) -> None:
    judge_settings(ev)
    judge_claims(ev)
    judge_values(ev)
    judge_dates(ev)
    judge_tools(ev)
