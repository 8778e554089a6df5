"""Blueprint: recover from a phone action that a device setting blocks (target: ToolSandbox; the phone kit).

ToolSandbox's settings depend on one another and its tools enforce it: texting needs cellular service, the
current location needs location services, the holiday lookup needs wifi, and while low battery mode is on the
radios refuse to switch on. So a request can fail one or two levels deep: "text Mia" -> cellular is off ->
cellular cannot come on because low battery mode is on. An agent with the capability reads each error, fixes
exactly the setting in the way, retries and says what it changed. Some scenarios are not blocked at all (or by
something other than the obvious suspect), so flipping settings by reflex is gated to zero.
"""

import datetime

from trace_env import sdk
from trace_env.kits import text
from trace_env.kits import toolsandbox as phone

MESSAGE_TEXTS = (
    "Running {n} minutes late, start without me", "Can you pick up bread on your way home?",
    "The meeting moved to {h} o'clock", "Don't forget the concert tickets tonight",
    "I left my keys at your place, can I grab them later?", "Dinner at {h} still works for me", "Call me when you land",
    "Happy birthday! Hope your day is great", "The package arrived, it's on the porch",
    "Parking is full, I'll meet you at the north entrance", "Thanks again for the help with the move",
    "Rent transfer is done for this month", "Practice is cancelled today, the field is flooded",
    "Can we push our call by {n} minutes?",
)
REMINDER_TASKS = (
    "pick up the dry cleaning", "water the plants", "grab the package from the front desk", "check the parking meter",
    "buy milk and eggs", "call the landlord", "return the library books", "feed the neighbor's cat",
    "move the car for street cleaning", "take the laundry out", "collect the bike from the repair shop",
    "drop off the recycling",
)
OLD_REMINDERS = ("Renew passport", "Book dentist appointment", "Pay electricity bill", "Order printer ink",
                 "Send thank-you cards", "Back up laptop")
# Variants: `goal` is what the user asks for; `low_battery` whether low battery mode starts on; `requires` the
# settings that must end in a given state for the goal to succeed (the blocker chain). Unblocked variants carry a
# `decoy`: a setting that looks relevant but is not needed.
VARIANTS = {
    "message_cellular_off": {"goal": "message", "low_battery": False, "requires": {"cellular": True}, "weight": 3},
    "message_low_battery": {"goal": "message", "low_battery": True, "requires": {"cellular": True, "low_battery_mode": False},
                            "weight": 3},
    "enable_setting_low_battery": {"goal": "setting", "low_battery": True, "requires": {"low_battery_mode": False},
                                   "weight": 2.5},
    "location_reminder_location_off": {"goal": "location_reminder", "low_battery": False,
                                       "requires": {"location_service": True}, "weight": 2},
    "location_reminder_low_battery": {"goal": "location_reminder", "low_battery": True,
                                      "requires": {"location_service": True, "low_battery_mode": False}, "weight": 2},
    "holiday_wifi_off": {"goal": "holiday", "low_battery": False, "requires": {"wifi": True}, "weight": 1.5},
    "holiday_low_battery": {"goal": "holiday", "low_battery": True, "requires": {"wifi": True, "low_battery_mode": False},
                            "weight": 1.5},
    # Nothing is blocked in these three; each starts with a tempting but irrelevant setting in the "wrong" state.
    "message_unblocked": {"goal": "message", "low_battery": False, "requires": {}, "decoy": "wifi", "weight": 1.5},
    "location_reminder_unblocked": {"goal": "location_reminder", "low_battery": False, "requires": {}, "decoy": "wifi",
                                    "weight": 1.2},
    "contact_low_battery": {"goal": "contact", "low_battery": True, "requires": {}, "decoy": "low_battery_mode",
                            "weight": 1.3},
}
HOLIDAY_QUESTIONS = (("Thanksgiving", "Thanksgiving"), ("Memorial Day", "Memorial Day"), ("Labor Day", "Labor Day"),
                     ("Martin Luther King Jr. Day", "MLK Day"), ("Washington's Birthday", "Presidents' Day"),
                     ("Columbus Day", "Columbus Day"))
RADIO_OF_GOAL = {"message": "cellular", "location_reminder": "location_service", "holiday": "wifi"}


def mentions(spoken, words):
    return any(word in spoken.lower() for word in words)


class PermissionErrorRecoveryEnv(phone.PhoneTools, sdk.TaskEnv):
    capability = "permission_error_recovery"
    target = "toolsandbox"
    description = (
        "Recovering from a blocked action on a phone whose settings depend on one another. The user asks for something "
        "ordinary - text a contact, switch on wifi or cellular, set a reminder pinned to the current location, look up "
        "a holiday date - and the tool fails because a setting is off, sometimes two levels deep because low battery "
        "mode stops that setting from switching on. The agent must read the error, find the real blocker, fix exactly "
        "that, retry the original action and report which settings it changed. Some scenarios are not blocked at all, "
        "so reflexively toggling settings is gated to zero."
    )
    tool_names = ["search_contacts", "search_messages", "send_message_with_phone_number", "add_contact", "add_reminder",
                  "search_reminder", "get_low_battery_mode_status", "get_wifi_status", "get_cellular_service_status",
                  "get_location_service_status", "set_low_battery_mode_status", "set_wifi_status",
                  "set_cellular_service_status", "set_location_service_status", "get_current_location",
                  "get_current_timestamp", "shift_timestamp", "timestamp_to_datetime_info", "search_holiday"]
    write_tools = frozenset({"send_message_with_phone_number", "add_contact", "add_reminder", *phone.SETTER.values()})
    max_steps = 24

    # --- scenario -------------------------------------------------------------------------------------
    def generate(self, seed):
        rng = self.rng(seed)
        names = list(VARIANTS)
        variant_name = rng.choices(names, weights=[VARIANTS[n]["weight"] for n in names])[0]
        variant = VARIANTS[variant_name]
        # Device clock: a random moment between 2025 and 2030 (UTC), with sub-second noise like a real clock.
        now = round(datetime.datetime(2025, 1, 1, tzinfo=phone.UTC).timestamp() + rng.uniform(0, 6 * 365 * 86400), 3)
        lat, lon = rng.choice(phone.PLACES)
        lat, lon = round(lat + rng.uniform(-0.02, 0.02), 6), round(lon + rng.uniform(-0.02, 0.02), 6)
        world = phone.PhoneWorld(rng, now)
        contacts = world.contacts(rng.randint(5, 8))
        owner, others = contacts[0], contacts[1:]
        messages = world.messages(owner, others, rng.randint(2, 5))
        reminders = [world.reminder(content) for content in rng.sample(OLD_REMINDERS, rng.randint(1, 3))]
        if variant["low_battery"]:  # ToolSandbox's invariant: low battery mode switches the three radios off
            settings = {"low_battery_mode": True, "wifi": False, "cellular": False, "location_service": False}
        else:
            settings = {"low_battery_mode": False, **{name: rng.random() < 0.6 for name in ("wifi", "cellular", "location_service")}}
            settings.update({name: not needed for name, needed in variant["requires"].items()})  # the blocker blocks
            if not variant["requires"] and variant["goal"] in RADIO_OF_GOAL:
                settings[RADIO_OF_GOAL[variant["goal"]]] = True  # unblocked: the needed radio is on
            if variant.get("decoy") in ("wifi", "cellular", "location_service"):
                settings[variant["decoy"]] = False  # tempting to switch on, but not needed
        settings.update(latitude=lat, longitude=lon)
        goal, user = self.make_goal(rng, variant, others, now, lat, lon)
        rng.shuffle(contacts)  # the owner need not come first in the contact book
        requires = dict(variant["requires"])
        allowed = sorted(dict.fromkeys([*requires, *([goal["setting"]] if goal["kind"] == "setting" else [])]))
        truth = {"goal": goal, "requires": requires, "allowed_settings": allowed,
                 "blocked": bool(requires) or goal["kind"] == "setting"}
        return sdk.Scenario(seed=seed, state=world.state(settings, contacts, messages, reminders), user=user, truth=truth,
                            meta={"variant": variant_name})

    def make_goal(self, rng, variant, others, now, lat, lon):
        kind = variant["goal"]
        facts = []
        if kind == "message":
            target = rng.choice(others)
            content = rng.choice(MESSAGE_TEXTS).format(n=rng.choice((5, 10, 15, 20, 25)), h=rng.randint(2, 8))
            by_relation = rng.random() < 0.35
            request = rng.choice(('Send a text to {who} saying "{content}".', 'Can you message {who}: "{content}"',
                                  "Please text {who} the following: {content}",
                                  'I need to let {who} know something. Send them: "{content}"')).format(
                who=f"my {target['relationship']}" if by_relation else target["name"], content=content)
            goal = {"kind": "message", "person_id": target["person_id"], "name": target["name"],
                    "phone_number": target["phone_number"], "content": content,
                    "search": {"relationship": target["relationship"]} if by_relation else {"name": target["name"]}}
            facts = [[["which contact", "who should i", "who is the recipient", "who do you want"],
                      f"It's {target['name']}, they're saved in my contacts."],
                     [["what should the message say", "what would you like the message to say", "what should i write"],
                      f"Just send: {content}"]]
        elif kind == "setting":
            setting = rng.choice(("wifi", "cellular", "location_service"))
            label = rng.choice({"wifi": ("wifi", "Wi-Fi", "my wifi"),
                                "cellular": ("cellular service", "cellular data", "mobile data"),
                                "location_service": ("location services", "location", "GPS location")}[setting])
            request = rng.choice(("Turn on {label} please.", "I need {label} on right now.",
                                  "Can you switch {label} on for me?", "Please enable {label}.",
                                  "Hey, {label} seems to be off. Turn it on?")).format(label=label)
            goal = {"kind": "setting", "setting": setting}
        elif kind == "location_reminder":
            task, hours = rng.choice(REMINDER_TASKS), rng.randint(1, 6)
            request = rng.choice(("Remind me to {task} when I'm back at this spot, in {h} hours.",
                                  "Set a reminder {h} hours from now to {task}, tied to where I am right now.",
                                  "In {h} hours, remind me to {task}. Attach my current location to it.",
                                  "I'll be back here later. Make a reminder to {task} in {h} hours with this location on it.",
                                  )).format(task=task, h=hours if rng.random() < 0.6 else (
                                      "one", "two", "three", "four", "five", "six")[hours - 1])
            goal = {"kind": "location_reminder", "content": task, "hours": hours,
                    "reminder_timestamp": round(now + hours * 3600, 3), "latitude": lat, "longitude": lon}
            facts = [[["what time should", "when should", "how many hours from now"], f"In {hours} hours from now."]]
        elif kind == "holiday":
            canonical, spoken = rng.choice(HOLIDAY_QUESTIONS)
            year = rng.randint(2025, 2032)
            request = rng.choice(("What date is {h} in {y}?", "When does {h} fall in {y}?",
                                  "Can you look up the date of {h} {y}?",
                                  "I'm planning a trip. Which day is {h} in {y}?")).format(h=spoken, y=year)
            goal = {"kind": "holiday", "holiday": canonical, "spoken": spoken, "year": year,
                    "date": phone.us_holidays(year)[canonical].isoformat()}
            facts = [[["which year", "what year should"], f"{year}."]]
        else:  # contact
            first, last = rng.choice(phone.FIRST_NAMES), rng.choice(phone.LAST_NAMES)
            while any(c["name"] == f"{first} {last}" for c in others):
                first = rng.choice(phone.FIRST_NAMES)
            number = f"+1{rng.choice(phone.AREA_CODES)}{rng.randint(2000000, 9999999)}"
            relation = rng.choice(("friend", "coworker", "plumber", "tutor", "vet"))
            request = rng.choice(("Add {name} to my contacts, number {phone}.", "Save a new contact: {name}, {phone}.",
                                  "Please create a contact for {name} ({rel}) with the number {phone}.")).format(
                name=f"{first} {last}", phone=number, rel=relation)
            goal = {"kind": "contact", "name": f"{first} {last}", "phone_number": number}
            facts = [[["what is their number", "what's their number", "what is the phone number", "which number"],
                      f"The number is {number}."]]
        persona = rng.choice(("busy commuter who wants things done quickly", "relaxed user who trusts the assistant",
                              "slightly anxious user whose phone battery is often low",
                              "traveller juggling plans on the go"))
        return goal, {"request": request, "persona": persona, "facts": facts}

    # --- prompt -----------------------------------------------------------------------------------------
    def system_prompt(self, scenario):
        return (
            "You are an assistant running on the user's phone. You act through the tools provided: contacts, messages, "
            "reminders, device settings and a few utilities. Timestamps are POSIX seconds and the device clock runs in "
            "UTC.\n\nRules:\n"
            "- Look things up with the tools (contacts, phone numbers, locations, times) instead of guessing them.\n"
            "- Device settings depend on one another. Texting needs cellular service; reading the current location "
            "needs location services; online lookups such as holidays need wifi; and while low battery mode is on, "
            "wifi, cellular service and location services cannot be switched on.\n"
            "- When a tool fails, read the error. If a setting is in the way, fix that setting (and whatever blocks it "
            "in turn), then retry the original action. You may do this without asking first.\n"
            "- Change only settings that actually block the request. Do not toggle other settings 'just in case', and "
            "leave a setting you had to change in its new state.\n"
            "- When you are done, tell the user the outcome and name every setting you changed.")

    def first_user_message(self, scenario):
        return scenario.user["request"]

    # --- reward -----------------------------------------------------------------------------------------
    def evaluate(self, episode):
        scenario, state = episode.scenario, episode.state
        truth, initial, spoken = scenario.truth, scenario.state, episode.assistant_text
        goal = truth["goal"]

        def new_rows(table, key):
            old = [row[key] for row in initial[table]]
            return [row for row in state[table] if row[key] not in old]

        messages, reminders = new_rows("messages", "message_id"), new_rows("reminders", "reminder_id")
        contacts = new_rows("contacts", "person_id")
        score = 0.0  # 1. was the user's request carried out? (final state, or the stated answer for a lookup)
        if goal["kind"] == "message":
            sent = [m for m in messages if phone.digits(m["recipient_phone_number"]) == phone.digits(goal["phone_number"])]
            if sent:
                score = 1.0 if max(text.overlap(goal["content"], m["content"]) for m in sent) >= 0.7 else 0.5
        elif goal["kind"] == "setting":
            score = 1.0 if state["settings"][goal["setting"]] else 0.0
        elif goal["kind"] == "location_reminder":
            for reminder in reminders:
                placed = (reminder["latitude"] is not None and reminder["longitude"] is not None
                          and abs(reminder["latitude"] - goal["latitude"]) < 1e-4
                          and abs(reminder["longitude"] - goal["longitude"]) < 1e-4)
                timed = abs(reminder["reminder_timestamp"] - goal["reminder_timestamp"]) <= 120
                score = max(score, 0.5 * placed + 0.3 * timed + 0.2 * (text.overlap(goal["content"], reminder["content"]) >= 0.5))
        elif goal["kind"] == "holiday":
            score = 1.0 if phone.mentions_date(spoken, datetime.date.fromisoformat(goal["date"])) else 0.0
        else:
            for contact in contacts:
                if phone.digits(contact["phone_number"]) == phone.digits(goal["phone_number"]):
                    score = max(score, 1.0 if text.overlap(goal["name"], contact["name"]) >= 0.99 else 0.5)
        requires = truth["requires"]  # 2. is every blocker in the state the request needs?
        fixed = sum(state["settings"][name] == value for name, value in requires.items()) / len(requires) if requires else 1.0
        # 3. did the user hear the outcome and which settings were changed?
        changed = [name for name in phone.SETTINGS if state["settings"][name] != initial["settings"][name]]
        topic = {"message": [goal.get("name", "").split(" ")[0].lower(), "message", "text"],
                 "setting": list(phone.SETTING_WORDS.get(goal.get("setting", ""), ())), "location_reminder": ["reminder"],
                 "holiday": [goal.get("spoken", "").lower()], "contact": [goal.get("name", "").split(" ")[0].lower()],
                 }[goal["kind"]]
        checks = [mentions(spoken, topic)] + [mentions(spoken, phone.SETTING_WORDS[name]) for name in changed]
        notes = {}
        # Gates: a setting outside the blocker chain was switched (even if switched back later); writes the user
        # never asked for (a text to someone else, stray reminders or contacts).
        unneeded = [name for name in phone.SETTINGS if episode.calls(phone.SETTER[name], ok=True)
                    and name not in truth["allowed_settings"]]
        if unneeded:
            notes["unneeded_setting_changes"] = ", ".join(unneeded)
        to_goal = [m for m in messages if goal["kind"] == "message"
                   and phone.digits(m["recipient_phone_number"]) == phone.digits(goal["phone_number"])]
        stray = len(messages) - len(to_goal) + max(0, len(to_goal) - 1)  # one message was asked for, not two
        stray += len(reminders) if goal["kind"] != "location_reminder" else max(0, len(reminders) - 1)
        stray += len(contacts) if goal["kind"] != "contact" else max(0, len(contacts) - 1)
        if stray:
            notes["unrequested_writes"] = str(stray)
        return sdk.Reward(
            components={"goal_achieved": score, "blocker_fixed": fixed,
                        "reported_outcome": sum(checks) / len(checks) if spoken else 0.0},
            weights={"goal_achieved": 3.0, "blocker_fixed": 1.5, "reported_outcome": 1.0},
            gates={"no_unneeded_setting_change": 0.0 if unneeded else 1.0, "no_unrequested_writes": 0.0 if stray else 1.0},
            notes=notes)

    # --- solutions --------------------------------------------------------------------------------------
    def goal_turns(self, scenario):
        """(look-ups to do first, the action that may be blocked and what follows it once it works)."""
        goal, now = scenario.truth["goal"], scenario.state["current_timestamp"]
        kind = goal["kind"]
        if kind == "message":  # sdk.calls (not sdk.call): these tools have a parameter literally called "name"
            return ([sdk.calls(("search_contacts", goal["search"]))],
                    [sdk.call("send_message_with_phone_number", phone_number=goal["phone_number"], content=goal["content"])])
        if kind == "setting":
            return [], [sdk.call(phone.SETTER[goal["setting"]], on=True)]
        if kind == "location_reminder":
            when = phone.moment_of(now) + datetime.timedelta(hours=goal["hours"])
            return [], [sdk.call("get_current_location"), sdk.call("get_current_timestamp"),
                        sdk.call("shift_timestamp", timestamp=now, hours=goal["hours"]),
                        sdk.call("add_reminder", content=goal["content"].capitalize(), reminder_timestamp=when.timestamp(),
                                 latitude=goal["latitude"], longitude=goal["longitude"])]
        if kind == "holiday":
            return [], [sdk.call("search_holiday", holiday_name=goal["spoken"], year=goal["year"]),
                        sdk.call("timestamp_to_datetime_info",
                                 timestamp=phone.midnight(datetime.date.fromisoformat(goal["date"])))]
        return [], [sdk.calls(("add_contact", {"name": goal["name"], "phone_number": goal["phone_number"]}))]

    def outcome(self, scenario):
        goal = scenario.truth["goal"]
        if goal["kind"] == "message":
            return f'Your message to {goal["name"]} has been sent: "{goal["content"]}".'
        if goal["kind"] == "setting":
            return f"{phone.SETTING_NAMES[goal['setting']].capitalize()} is now on."
        if goal["kind"] == "location_reminder":
            when = phone.moment_of(goal["reminder_timestamp"])
            return (f"Your reminder to {goal['content']} is set for {when:%H:%M} UTC on {phone.say_date(when.date())}, "
                    f"pinned to your current location ({goal['latitude']:.4f}, {goal['longitude']:.4f}).")
        if goal["kind"] == "holiday":
            return f"{goal['spoken']} {goal['year']} falls on {phone.say_date(datetime.date.fromisoformat(goal['date']))}."
        return f"{goal['name']} is saved in your contacts with the number {goal['phone_number']}."

    def reference_solution(self, scenario):
        truth, settings = scenario.truth, scenario.state["settings"]
        lookups, action = self.goal_turns(scenario)
        turns = list(lookups)
        setting_goal = truth["goal"]["kind"] == "setting"
        radios = [truth["goal"]["setting"]] if setting_goal else [n for n in truth["requires"] if n != "low_battery_mode"]
        if radios:
            # Try first: the error names the missing setting; switching it on may fail in turn because of low battery
            # mode, and that error names the second-level blocker.
            turns += [] if setting_goal else [action[0]]
            for radio in radios:
                turns.append(sdk.call(phone.SETTER[radio], on=True))
                if settings["low_battery_mode"]:
                    turns += [sdk.call("get_low_battery_mode_status"), sdk.call("set_low_battery_mode_status", on=False),
                              sdk.call(phone.SETTER[radio], on=True)]
            turns += [] if setting_goal else action
        else:
            turns += action
        summary = self.outcome(scenario)
        fixes = sorted(truth["requires"], key=lambda name: name != "low_battery_mode")  # in the order they were made
        if fixes:
            words = " and ".join(f"turned {'on' if truth['requires'][name] else 'off'} {phone.SETTING_NAMES[name]}"
                                 for name in fixes)
            summary += f" It was blocked at first, so I {words}; I left them that way."
        return turns + [sdk.say(summary)]

    def capability_skipping_solution(self, scenario):
        """An agent that does not diagnose settings. Blocked: it tries the action and on the error gives up, retries
        the identical call, or flips the setting it associates with "connectivity" and retries - then reports the
        failure. Unblocked: it "prepares" the phone by reflex, switching the decoy setting before doing what was asked."""
        truth = scenario.truth
        goal = truth["goal"]
        lookups, action = self.goal_turns(scenario)
        turns = list(lookups)
        if not truth["blocked"]:
            decoy = VARIANTS[scenario.meta["variant"]]["decoy"]
            return turns + [sdk.call(phone.SETTER[decoy], on=decoy != "low_battery_mode")] + action + [
                sdk.say(self.outcome(scenario) + f" I also set up {phone.SETTING_NAMES[decoy]} so everything works.")]
        turns.append(action[0])
        style = scenario.seed % 3
        if style == 1:
            turns.append(action[0])  # same call again, nothing fixed
        elif style == 2:
            guess = "cellular" if goal["kind"] == "holiday" or goal.get("setting") == "wifi" else "wifi"
            turns += [sdk.call(phone.SETTER[guess], on=True), action[0]]
        what = {"message": f"send your message to {goal.get('name', '')}",
                "setting": f"turn on {phone.SETTING_NAMES.get(goal.get('setting', ''), '')}",
                "location_reminder": "create that location reminder", "holiday": f"look up {goal.get('spoken', '')}",
                "contact": "save the contact"}[goal["kind"]]
        return turns + [sdk.say(f"Sorry, I wasn't able to {what}: the phone returned an error. You may want to check "
                                "your settings and try again later.")]


ENV = PermissionErrorRecoveryEnv
