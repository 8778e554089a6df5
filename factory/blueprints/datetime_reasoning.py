"""Blueprint: date and time reasoning with the device clock and the timestamp tools (target: ToolSandbox; phone kit).

The user speaks in relative terms - "next Friday at 9am", "in 3 days at 5pm", "two weeks from today", "the day
before Thanksgiving this year", "how many days until Labor Day?", "how long until my dentist reminder goes off?" -
and the answer depends on a moment only ``get_current_timestamp`` reveals: the scenario's clock is random (2025 to
2031, any month, weekday and hour) and the prompt never states it. An agent with the capability reads the clock,
computes with the timestamp tools, writes the exact timestamp and tells the user the date; one without it assumes
a "today" or slips a day. Near misses (right day, wrong hour; one day off) earn partial credit. All times are UTC.
"""

import datetime

from trace_env import sdk
from trace_env.kits import text
from trace_env.kits import toolsandbox as phone

# What an agent that never checks the clock believes "now" is: a plausible training-cutoff date, always wrong here.
STALE_NOW = datetime.datetime(2024, 6, 13, 9, 0, tzinfo=phone.UTC)
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
REMINDER_TASKS = (
    "call the insurance company", "submit the expense report", "pick up the cake", "book a haircut",
    "renew the parking permit", "send the invoice to Dana", "water the garden", "pay the credit card bill",
    "buy a gift for Sam", "check in for the flight", "take the car for an oil change", "call grandma",
    "bring the projector to work", "order more coffee beans", "drop the keys at the front desk",
)
OLD_REMINDERS = ("Dentist appointment", "Team standup notes", "Return the rental skis", "Pharmacy pickup", "Gym class",
                 "Pay the water bill", "Vet appointment for Biscuit", "Parent-teacher meeting", "Pick up dry cleaning")
CLOCK_TIMES = ((7, 0), (8, 0), (8, 30), (9, 0), (10, 0), (11, 15), (12, 0), (13, 30), (14, 0), (15, 0), (16, 45),
               (17, 0), (18, 30), (19, 0), (20, 0), (21, 0))
# Variant -> weight. The first four create a reminder; the last three are questions.
VARIANTS = {"weekday_reminder": 2.5, "days_offset_reminder": 2.0, "weeks_offset_reminder": 1.5, "holiday_reminder": 2.0,
            "days_until_holiday": 1.5, "time_until_reminder": 1.5, "date_in_n_days": 1.0}
HOLIDAY_SPOKEN = {  # canonical name -> how a user says it
    "New Year's Day": "New Year's Day", "Martin Luther King Jr. Day": "MLK Day", "Washington's Birthday": "Presidents' Day",
    "Memorial Day": "Memorial Day", "Juneteenth National Independence Day": "Juneteenth",
    "Independence Day": "the Fourth of July", "Labor Day": "Labor Day", "Columbus Day": "Columbus Day",
    "Veterans Day": "Veterans Day", "Thanksgiving": "Thanksgiving", "Christmas Day": "Christmas",
}
HOLIDAY_OFFSETS = {-2: "two days before {h}", -1: "the day before {h}", 0: "on {h}", 1: "the day after {h}"}


def spoken_time(rng, hour, minute):
    """A clock time as a user might type it: 9am, 9:00 AM, 17:00, noon."""
    if (hour, minute) == (12, 0) and rng.random() < 0.5:
        return "noon"
    h12, suffix = (hour % 12 or 12), ("am" if hour < 12 else "pm")
    style = rng.randrange(3)
    if style == 0:
        return f"{h12}{suffix}" if minute == 0 else f"{h12}:{minute:02d}{suffix}"
    return f"{h12}:{minute:02d} {suffix.upper()}" if style == 1 else f"{hour:02d}:{minute:02d}"


def capitalised(words):
    return words[0].upper() + words[1:]


class DatetimeReasoningEnv(phone.PhoneTools, sdk.TaskEnv):
    capability = "datetime_reasoning"
    target = "toolsandbox"
    description = (
        "Date and time reasoning grounded in the device clock. The user asks for a reminder at a relative time (next "
        "Friday at 9am, in 3 days at 5pm, two weeks from today, the day before Thanksgiving this year) or asks a time "
        "question (days until a holiday, hours and minutes until a reminder fires, the date N days from today). The "
        "current moment is random per scenario and only get_current_timestamp reveals it; the agent must read it and "
        "compute with the timestamp tools. Graded on the exact timestamp or answer, with partial credit for near "
        "misses, on stating the date, and on checking the clock before committing."
    )
    tool_names = ["get_current_timestamp", "timestamp_to_datetime_info", "datetime_info_to_timestamp", "shift_timestamp",
                  "timestamp_diff", "seconds_to_hours_minutes_seconds", "search_holiday", "add_reminder",
                  "search_reminder", "modify_reminder", "remove_reminder", "get_wifi_status", "unit_conversion"]
    write_tools = frozenset({"add_reminder", "modify_reminder", "remove_reminder"})
    max_steps = 20

    # --- scenario -------------------------------------------------------------------------------------
    def generate(self, seed):
        rng = self.rng(seed)
        day = datetime.date(2025, 1, 1) + datetime.timedelta(days=rng.randrange(7 * 365))
        now = round(phone.midnight(day) + rng.uniform(6 * 3600, 23 * 3600), 3)  # 06:00 to 23:00 UTC, sub-second noise
        today = phone.date_of(now)
        world = phone.PhoneWorld(rng, now)
        reminders = [world.reminder(content, (1, 30), (-5, 25)) for content in rng.sample(OLD_REMINDERS, rng.randint(2, 5))]
        names = list(VARIANTS)
        variant = rng.choices(names, weights=[VARIANTS[n] for n in names])[0]
        ahead = [(name, date) for name, date in phone.us_holidays(today.year).items() if (date - today).days >= 3]
        if variant == "holiday_reminder" and not ahead:
            variant = "days_offset_reminder"  # late December: nothing left "this year"
        makers = {"weekday_reminder": self.weekday_reminder, "days_offset_reminder": self.days_offset_reminder,
                  "weeks_offset_reminder": self.weeks_offset_reminder, "holiday_reminder": self.holiday_reminder,
                  "days_until_holiday": self.days_until_holiday, "time_until_reminder": self.time_until_reminder,
                  "date_in_n_days": self.date_in_n_days}
        truth, request = makers[variant](world, now, today, ahead, reminders)
        rng.shuffle(reminders)
        settings = {"low_battery_mode": False, "wifi": True, "cellular": True, "location_service": True}
        user = {"request": request,
                "persona": rng.choice(("organised planner", "busy parent", "student juggling deadlines",
                                       "freelancer who lives by reminders")),
                # The user does not know the timestamp either; asked for the date, they defer to the phone.
                "facts": [[["what is today's date", "what's today's date", "what day is it today", "what is the current date",
                            "what's the current date", "what is the date today"],
                           "I'm not sure off the top of my head - can't you check the phone's clock?"],
                          [["what should the reminder say", "what would you like the reminder to say"],
                           f"Just call it: {truth.get('content', 'the reminder')}."]]}
        return sdk.Scenario(seed=seed, state=world.state(settings, reminders=reminders), user=user, truth=truth,
                            meta={"variant": variant})

    # Each maker returns (truth, first user message). Reminder truths share one shape.
    def reminder_truth(self, rng, target, how, phrase):
        hour, minute = rng.choice(CLOCK_TIMES)
        task = rng.choice(REMINDER_TASKS)
        when = f"{phrase} at {spoken_time(rng, hour, minute)}"
        request = rng.choice(("Remind me to {task} {when}.", "Can you set a reminder {when} to {task}?",
                              "Please add a reminder: {task}, {when}.", "I need a reminder {when} - {task}.")).format(
            task=task, when=when)
        return {"kind": "reminder", "how": how, "content": task, "date": target.isoformat(), "hour": hour,
                "minute": minute, "reminder_timestamp": phone.at(target, hour, minute)}, request

    def weekday_reminder(self, world, now, today, ahead, reminders):
        weekday = world.rng.randrange(7)
        days = (weekday - today.weekday()) % 7 or 7  # the first such day strictly after today
        phrase = world.rng.choice(("next {d}", "this coming {d}", "on {d}")).format(d=phone.WEEKDAYS[weekday])
        truth, request = self.reminder_truth(world.rng, today + datetime.timedelta(days=days), "weekday", phrase)
        return dict(truth, days_ahead=days), request

    def days_offset_reminder(self, world, now, today, ahead, reminders):
        rng = world.rng
        n = rng.choice((1, 2, 2, 3, 3, 4, 5, 6, 8, 10))
        phrase = {1: "tomorrow", 2: rng.choice(("the day after tomorrow", "in 2 days"))}.get(
            n, rng.choice((f"in {n} days", f"{NUMBER_WORDS[n]} days from now")))
        truth, request = self.reminder_truth(rng, today + datetime.timedelta(days=n), "days", phrase)
        return dict(truth, days_ahead=n), request

    def weeks_offset_reminder(self, world, now, today, ahead, reminders):
        rng = world.rng
        n = rng.choice((1, 2, 2, 3, 4))
        phrase = (rng.choice(("a week from today", "one week from today")) if n == 1
                  else rng.choice((f"{n} weeks from today", f"{NUMBER_WORDS[n]} weeks from today")))
        truth, request = self.reminder_truth(rng, today + datetime.timedelta(weeks=n), "weeks", phrase)
        return dict(truth, days_ahead=7 * n), request

    def holiday_reminder(self, world, now, today, ahead, reminders):
        rng = world.rng
        name, day = rng.choice(ahead)
        offset = rng.choice(list(HOLIDAY_OFFSETS))
        phrase = HOLIDAY_OFFSETS[offset].format(h=HOLIDAY_SPOKEN[name]) + rng.choice((" this year", ""))
        truth, request = self.reminder_truth(rng, day + datetime.timedelta(days=offset), "holiday", phrase)
        return dict(truth, holiday=name, holiday_offset=offset), request

    def days_until_holiday(self, world, now, today, ahead, reminders):
        # Next year's New Year's Day is always a candidate; search_holiday defaults to the current year, so the
        # agent has to notice that this year's has passed and ask for the next one.
        name, day = world.rng.choice([(n, d) for n, d in ahead if n != "New Year's Day"]
                                     + [("New Year's Day", datetime.date(today.year + 1, 1, 1))])
        request = world.rng.choice(("How many days until {h}?", "How many days are left until {h}?",
                                    "How far away is {h}, in days?", "Count the days for me: how long until {h}?",
                                    )).format(h=HOLIDAY_SPOKEN[name])
        return {"kind": "days_until", "holiday": name, "date": day.isoformat(), "days": (day - today).days}, request

    def time_until_reminder(self, world, now, today, ahead, reminders):
        rng = world.rng
        task = rng.choice(REMINDER_TASKS)
        gap = rng.randint(1, 19) * 3600 + rng.randint(0, 59) * 60 + rng.randint(3, 57)
        reminder = {"reminder_id": world.uuid(), "content": capitalised(task),
                    "creation_timestamp": round(now - rng.uniform(1, 10) * 86400, 3),
                    "reminder_timestamp": round(now + gap, 3), "latitude": None, "longitude": None}
        reminders.append(reminder)
        request = rng.choice(("How long until my reminder to {t} goes off? Hours and minutes, please.",
                              "How much time do I have before the '{t}' reminder? Give me hours and minutes.",
                              "In how many hours and minutes will my {t} reminder fire?")).format(t=task)
        # Floor to whole minutes is the rule in the prompt; rounding to the nearest minute is also accepted.
        floor, nearest = gap // 60, round(gap / 60)
        accepted = sorted(dict.fromkeys([(floor // 60, floor % 60), (nearest // 60, nearest % 60)]))
        return {"kind": "time_until", "reminder_id": reminder["reminder_id"], "content": task, "seconds": gap,
                "accepted": accepted}, request

    def date_in_n_days(self, world, now, today, ahead, reminders):
        n = world.rng.choice((10, 14, 21, 30, 45, 60, 75, 90, 100, 120, 150, 180, 200))
        request = world.rng.choice(("What's the date {n} days from today?", "Which date will it be in {n} days?",
                                    "If something is due {n} days from today, what date is that?")).format(n=n)
        return {"kind": "date_after", "days": n, "date": (today + datetime.timedelta(days=n)).isoformat()}, request

    # --- prompt -----------------------------------------------------------------------------------------
    def system_prompt(self, scenario):
        # Deliberately no date here: the agent has to read the device clock.
        return (
            "You are an assistant running on the user's phone, with tools for reminders, device settings and date/time "
            "utilities. Timestamps are POSIX seconds, and the device clock and every time tool use UTC.\n\nRules:\n"
            "- Never assume today's date or the current time. Call get_current_timestamp before working out any date, "
            "and do date arithmetic with the timestamp tools rather than in your head.\n"
            "- A weekday on its own ('next Friday', 'this coming Friday', 'on Friday') means the first such day after "
            "today; if today is that weekday, it means the one a week later.\n"
            "- 'In N days' and 'N weeks from today' count calendar days from today's date; a clock time the user names "
            "is on that day, in UTC.\n"
            "- search_holiday returns the date of a US holiday (midnight UTC); 'this year' means the current year.\n"
            "- 'How many days until' counts calendar days from today's date (tomorrow is 1 day away). 'How long until' "
            "is answered in hours and minutes, rounded down to the minute.\n"
            "- After creating a reminder, tell the user its exact date and time. Only create, change or delete reminders "
            "when the user asks for it.")

    def first_user_message(self, scenario):
        return scenario.user["request"]

    # --- reward -----------------------------------------------------------------------------------------
    def evaluate(self, episode):
        scenario, state, truth = episode.scenario, episode.state, episode.scenario.truth
        spoken = episode.assistant_text
        initial = {r["reminder_id"]: r for r in scenario.state["reminders"]}
        final = {r["reminder_id"]: r for r in state["reminders"]}
        new = [r for rid, r in final.items() if rid not in initial]
        touched = [rid for rid, r in initial.items() if final.get(rid) != r]
        clock_at = episode.first_index("get_current_timestamp")
        if truth["kind"] == "reminder":
            day = datetime.date.fromisoformat(truth["date"])
            timing = max([self.timestamp_score(r["reminder_timestamp"], truth) for r in new], default=0.0)
            content = max([float(text.overlap(truth["content"], r["content"]) >= 0.6) for r in new], default=0.0)
            stated = 0.5 * phone.mentions_date(spoken, day) + 0.5 * phone.mentions_time(spoken, truth["hour"], truth["minute"])
            committed_at = episode.first_index("add_reminder")
            checked = clock_at is not None and (committed_at is None or clock_at < committed_at)
            components = {"reminder_time": timing, "reminder_content": content, "stated_date": stated if new else 0.0,
                          "checked_clock": 1.0 if checked else 0.0}
            weights = {"reminder_time": 3.0, "reminder_content": 1.0, "stated_date": 1.0, "checked_clock": 1.0}
            # Hedging with several reminders at different times is not an answer.
            gates = {"existing_reminders_untouched": 0.0 if touched else 1.0, "single_new_reminder": 0.5 if len(new) > 1 else 1.0}
        else:
            grounding = {"days_until": ("search_holiday",), "time_until": ("search_reminder",),
                         "date_after": ("shift_timestamp", "timestamp_to_datetime_info")}[truth["kind"]]
            components = {"answer": self.answer_score(spoken, truth), "checked_clock": 1.0 if clock_at is not None else 0.0,
                          "used_time_tools": 1.0 if any(episode.calls(name, ok=True) for name in grounding) else 0.0}
            weights = {"answer": 3.0, "checked_clock": 1.0, "used_time_tools": 1.0}
            gates = {"no_reminder_changes": 0.0 if (touched or new) else 1.0}
        return sdk.Reward(components=components, weights=weights, gates=gates,
                          notes={"touched_reminders": ", ".join(touched)} if touched else {})

    @staticmethod
    def timestamp_score(stamp, truth):
        """1 for the exact moment (within a minute); 0.5 for the right day at the wrong time; 0.25 for the right
        time one day off (the classic off-by-one); otherwise 0."""
        if abs(stamp - truth["reminder_timestamp"]) <= 60:
            return 1.0
        try:
            moment = phone.moment_of(stamp)
        except (OverflowError, OSError, ValueError):
            return 0.0
        target = datetime.date.fromisoformat(truth["date"])
        if moment.date() == target:
            return 0.5
        off_by_one = abs((moment.date() - target).days) == 1 and (moment.hour, moment.minute) == (truth["hour"], truth["minute"])
        return 0.25 if off_by_one else 0.0

    @staticmethod
    def answer_score(spoken, truth):
        if truth["kind"] == "days_until":
            days = phone.durations(spoken, "day")
            if truth["days"] in days:
                return 1.0
            return 0.5 if truth["days"] - 1 in days or truth["days"] + 1 in days else 0.0  # counted from now, not today
        if truth["kind"] == "time_until":
            hours, minutes = phone.durations(spoken, "hour"), phone.durations(spoken, "minute")
            if any(h in hours and m in minutes for h, m in truth["accepted"]):
                return 1.0
            return 0.5 if any(h in hours for h, _ in truth["accepted"]) else 0.0
        target = datetime.date.fromisoformat(truth["date"])
        if phone.mentions_date(spoken, target):
            return 1.0
        near = (target - datetime.timedelta(days=1), target + datetime.timedelta(days=1))
        return 0.5 if any(phone.mentions_date(spoken, day) for day in near) else 0.0

    # --- solutions --------------------------------------------------------------------------------------
    def reference_solution(self, scenario):
        """Read the clock, compute with the tools, commit the exact timestamp, state the date."""
        truth, now = scenario.truth, scenario.state["current_timestamp"]
        today = phone.date_of(now)
        turns = [sdk.call("get_current_timestamp"), sdk.call("timestamp_to_datetime_info", timestamp=now)]
        kind = truth["kind"]
        if kind == "reminder":
            hour, minute = truth["hour"], truth["minute"]
            if truth["how"] == "holiday":
                turns.append(sdk.call("search_holiday", holiday_name=HOLIDAY_SPOKEN[truth["holiday"]]))
                turns.append(sdk.call("shift_timestamp", timestamp=phone.midnight(phone.us_holidays(today.year)[truth["holiday"]]),
                                      days=truth["holiday_offset"], hours=hour, minutes=minute))
            else:
                turns.append(sdk.call("datetime_info_to_timestamp", year=today.year, month=today.month, day=today.day,
                                      hour=hour, minute=minute, second=0))
                turns.append(sdk.call("shift_timestamp", timestamp=phone.at(today, hour, minute), days=truth["days_ahead"]))
            turns.append(sdk.call("add_reminder", content=capitalised(truth["content"]),
                                  reminder_timestamp=truth["reminder_timestamp"]))
            turns.append(sdk.say(f"Your reminder to {truth['content']} is set for "
                                 f"{phone.say_date(datetime.date.fromisoformat(truth['date']))} at {hour:02d}:{minute:02d} UTC."))
        elif kind == "days_until":
            day = datetime.date.fromisoformat(truth["date"])
            turns += [sdk.call("datetime_info_to_timestamp", year=today.year, month=today.month, day=today.day, hour=0,
                               minute=0, second=0),
                      sdk.call("search_holiday", holiday_name=HOLIDAY_SPOKEN[truth["holiday"]], year=day.year),
                      sdk.call("timestamp_diff", timestamp_0=phone.midnight(today), timestamp_1=phone.midnight(day)),
                      sdk.say(f"{capitalised(HOLIDAY_SPOKEN[truth['holiday']])} is on {phone.say_date(day)}, which is "
                              f"{truth['days']} days from today.")]
        elif kind == "time_until":
            reminder = next(r for r in scenario.state["reminders"] if r["reminder_id"] == truth["reminder_id"])
            hours, minutes = truth["accepted"][0]
            turns += [sdk.call("search_reminder", content=truth["content"]),
                      sdk.call("timestamp_diff", timestamp_0=now, timestamp_1=reminder["reminder_timestamp"]),
                      sdk.call("seconds_to_hours_minutes_seconds", seconds=float(int(reminder["reminder_timestamp"] - now))),
                      sdk.say(f"Your reminder to {truth['content']} goes off in {hours} hours and {minutes} minutes.")]
        else:
            turns += [sdk.call("shift_timestamp", timestamp=now, days=truth["days"]),
                      sdk.call("timestamp_to_datetime_info", timestamp=now + truth["days"] * 86400),
                      sdk.say(f"{truth['days']} days from today is {phone.say_date(datetime.date.fromisoformat(truth['date']))}.")]
        return turns

    def capability_skipping_solution(self, scenario):
        """An agent that never reads the clock: it takes STALE_NOW as 'now' and does the (otherwise correct)
        arithmetic from there, so every date it produces belongs to the wrong day."""
        truth, today = scenario.truth, STALE_NOW.date()
        if truth["kind"] == "reminder":
            if truth["how"] == "holiday":
                day = phone.us_holidays(today.year)[truth["holiday"]] + datetime.timedelta(days=truth["holiday_offset"])
            elif truth["how"] == "weekday":
                weekday = datetime.date.fromisoformat(truth["date"]).weekday()
                day = today + datetime.timedelta(days=(weekday - today.weekday()) % 7 or 7)
            else:
                day = today + datetime.timedelta(days=truth["days_ahead"])
            return [sdk.call("add_reminder", content=capitalised(truth["content"]),
                             reminder_timestamp=phone.at(day, truth["hour"], truth["minute"])),
                    sdk.say(f"Done! I set your reminder to {truth['content']} for {phone.say_date(day)} at "
                            f"{truth['hour']:02d}:{truth['minute']:02d}.")]
        if truth["kind"] == "days_until":
            day = phone.us_holidays(today.year)[truth["holiday"]]
            day = day if day > today else phone.us_holidays(today.year + 1)[truth["holiday"]]
            return [sdk.say(f"{HOLIDAY_SPOKEN[truth['holiday']]} is {(day - today).days} days away.")]
        if truth["kind"] == "time_until":  # it finds the reminder, but guesses it is about 9 in the morning
            reminder = next(r for r in scenario.state["reminders"] if r["reminder_id"] == truth["reminder_id"])
            fires = phone.moment_of(reminder["reminder_timestamp"])
            gap = ((fires.hour * 60 + fires.minute) - (STALE_NOW.hour * 60 + STALE_NOW.minute)) % (24 * 60)
            return [sdk.call("search_reminder", content=truth["content"]),
                    sdk.say(f"Your reminder fires at {fires:%H:%M}. It's about {STALE_NOW:%H:%M} now, so that's in "
                            f"{gap // 60} hours and {gap % 60} minutes.")]
        day = today + datetime.timedelta(days=truth["days"])
        return [sdk.say(f"{truth['days']} days from today is {phone.say_date(day)}.")]


ENV = DatetimeReasoningEnv
