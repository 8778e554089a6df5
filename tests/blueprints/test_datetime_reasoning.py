"""The datetime_reasoning blueprint: contract checks plus what the capability means here.

The current moment is random per seed and only get_current_timestamp reveals it. The exact timestamp earns
full credit; the right day at the wrong hour, or the right hour one day off, earns partial credit; an agent
that assumes its own "today" earns little.
"""

from __future__ import annotations

import datetime
import json
from functools import lru_cache


from env_registry import sdk
from trace_env.loader import load_env
from trace_env.engine import EpisodeRunner, run_episode
from factory.blueprints import blueprint_source

CAPABILITY = "datetime_reasoning"
SEEDS = range(100)
UTC = datetime.timezone.utc


@lru_cache(maxsize=None)
def env() -> sdk.TaskEnv:
    return load_env(blueprint_source(CAPABILITY), module_name=f"test_bp_{CAPABILITY}")


@lru_cache(maxsize=None)
def rewards(which: str) -> tuple[float, ...]:
    e = env()
    solve = e.reference_solution if which == "reference" else e.capability_skipping_solution
    return tuple(run_episode(e, seed, solve(e.generate(seed)))["reward"] for seed in SEEDS)


def seed_of(variant: str, start: int = 0) -> int:
    for seed in range(start, start + 500):
        if env().generate(seed).meta["variant"] == variant:
            return seed
    raise AssertionError(f"no seed gives variant {variant}")


def play(seed: int, turns) -> dict:
    return run_episode(env(), seed, turns)


def replace_call(turns: list[sdk.Turn], name: str, **arguments) -> list[sdk.Turn]:
    """The turns with the arguments of every call to ``name`` updated."""
    out = []
    for turn in turns:
        calls = [sdk.Call(c.name, {**c.arguments, **arguments}) if c.name == name else c for c in turn.tool_calls]
        out.append(sdk.Turn(content=turn.content, tool_calls=calls))
    return out


# --- the generic contract --------------------------------------------------------------------------

def test_scenarios_are_diverse() -> None:
    scenarios = [env().generate(seed) for seed in range(200)]
    assert len({s.fingerprint() for s in scenarios}) >= 190
    assert len({sdk.canonical_json(s.truth) for s in scenarios}) >= 20
    assert len({s.meta["variant"] for s in scenarios}) == 7
    moments = [datetime.datetime.fromtimestamp(s.state["current_timestamp"], UTC) for s in scenarios]
    assert len({m.year for m in moments}) >= 6 and len({m.month for m in moments}) == 12
    assert len({m.weekday() for m in moments}) == 7


GARBAGE = [
    "",
    "{not json",
    '<tool_call>{"name": "x"',
    '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
    "x" * 100_000,
    {"content": None, "tool_calls": [{"function": {"name": "shift_timestamp", "arguments": [1]}}]},
    {"tool_calls": "not a list"},
]


def test_garbage_actions_never_raise() -> None:
    runner = EpisodeRunner(env())
    env_errors = []  # reset() clears runner.env_errors, so collect them after every step

    def step(action) -> str:
        result = runner.step(action)
        env_errors.extend(runner.env_errors)
        return result.observation

    for seed, garbage in enumerate(GARBAGE):
        runner.reset(seed)
        assert isinstance(step(garbage), str)
    for schema in env().tools():
        name = schema["function"]["name"]
        params = schema["function"]["parameters"].get("properties", {})
        for arguments in ({k: {"nested": [1]} for k in params} or {"unexpected": 1}, {}):
            runner.reset(3)
            assert isinstance(step(sdk.Turn(tool_calls=[sdk.Call(name, arguments)])), str)
        if not schema["function"]["parameters"].get("required"):  # an extra key the schema does not forbid
            runner.reset(3)
            assert "TypeError" in step(sdk.Turn(tool_calls=[sdk.Call(name, {"surprise": 1})]))
    # values the schema allows but the domain rejects
    for name, arguments in [
        ("datetime_info_to_timestamp", {"year": 2030, "month": 13, "day": 40, "hour": 25, "minute": 0, "second": 0}),
        ("datetime_info_to_timestamp", {"year": 10**12, "month": 1, "day": 1, "hour": 0, "minute": 0, "second": 0}),
        ("shift_timestamp", {"timestamp": 1e300, "weeks": 10**9}),
        ("shift_timestamp", {"timestamp": 1.9e9, "days": 10**12}),
        ("timestamp_diff", {"timestamp_0": -1e20, "timestamp_1": 1e20}),
        ("seconds_to_hours_minutes_seconds", {"seconds": 1e30}),
        ("search_holiday", {"holiday_name": "Thanksgiving", "year": -5}),
        ("unit_conversion", {"amount": 1.0, "from_unit": "parsec-ish", "to_unit": "meter"}),
        ("unit_conversion", {"amount": 1.0, "from_unit": "kg", "to_unit": "meter"}),
        ("modify_reminder", {"reminder_id": "nope"}),
        ("remove_reminder", {"reminder_id": "nope"}),
    ]:
        runner.reset(5)
        assert isinstance(step(sdk.Turn(tool_calls=[sdk.Call(name, arguments)])), str)
    assert not env_errors, env_errors


def test_reward_is_graded() -> None:
    partial = []
    for seed in range(20):
        turns = env().reference_solution(env().generate(seed))
        # Drop the clock read: the answer is still right, but it was not checked before committing.
        partial.append(play(seed, [t for t in turns if not any(c.name == "get_current_timestamp" for c in t.tool_calls)])["reward"])
    assert all(0 < r < 1 for r in partial), partial


# --- what the capability means here ---------------------------------------------------------------

def test_prompt_and_request_do_not_reveal_the_date() -> None:
    for seed in range(50):
        scenario = env().generate(seed)
        now = datetime.datetime.fromtimestamp(scenario.state["current_timestamp"], UTC)
        shown = env().system_prompt(scenario) + "\n" + env().first_user_message(scenario)
        assert str(now.year) not in shown
        assert now.strftime("%B") not in shown and now.date().isoformat() not in shown
        assert str(int(scenario.state["current_timestamp"])) not in shown


def test_holidays_follow_the_us_rules() -> None:
    runner = EpisodeRunner(env())
    runner.reset(0)
    known = {
        ("Thanksgiving", 2025): "2025-11-27", ("Thanksgiving", 2026): "2026-11-26", ("Thanksgiving", 2028): "2028-11-23",
        ("Memorial Day", 2025): "2025-05-26", ("Labor Day", 2025): "2025-09-01", ("MLK Day", 2025): "2025-01-20",
        ("Presidents' Day", 2025): "2025-02-17", ("Columbus Day", 2025): "2025-10-13",
        ("the Fourth of July", 2027): "2027-07-04", ("Christmas", 2031): "2031-12-25",
    }
    for (name, year), iso in known.items():
        observation = runner.step(sdk.call("search_holiday", holiday_name=name, year=year)).observation
        stamp = float(observation.split("] ", 1)[1])
        assert datetime.datetime.fromtimestamp(stamp, UTC).date().isoformat() == iso, (name, year)
    observation = runner.step(sdk.call("search_holiday", holiday_name="Festivus", year=2030)).observation
    assert observation.endswith("null")


def test_clock_is_utc_and_stated() -> None:
    seed = seed_of("weekday_reminder")
    runner = EpisodeRunner(env())
    runner.reset(seed)
    now = runner.step(sdk.call("get_current_timestamp")).observation.split("] ", 1)[1]
    info = json.loads(runner.step(sdk.call("timestamp_to_datetime_info", timestamp=float(now))).observation.split("] ", 1)[1])
    moment = datetime.datetime.fromtimestamp(float(now), UTC)
    assert info["timezone"] == "UTC" and (info["year"], info["month"], info["day"], info["hour"]) == (
        moment.year, moment.month, moment.day, moment.hour)


def test_right_day_wrong_hour_gets_partial_credit() -> None:
    seed = seed_of("weekday_reminder")
    scenario = env().generate(seed)
    truth = scenario.truth
    wrong_hour = truth["reminder_timestamp"] + (3 * 3600 if truth["hour"] < 20 else -3 * 3600)
    result = play(seed, replace_call(env().reference_solution(scenario), "add_reminder", reminder_timestamp=wrong_hour))
    assert result["reward_detail"]["components"]["reminder_time"] == 0.5
    assert 0.5 < result["reward"] < 1


def test_off_by_one_day_gets_little_credit() -> None:
    seed = seed_of("days_offset_reminder")
    scenario = env().generate(seed)
    one_off = scenario.truth["reminder_timestamp"] - 86400
    result = play(seed, replace_call(env().reference_solution(scenario), "add_reminder", reminder_timestamp=one_off))
    assert result["reward_detail"]["components"]["reminder_time"] == 0.25
    assert result["reward"] < play(seed, env().reference_solution(scenario))["reward"]


def test_days_until_counts_calendar_days() -> None:
    seed = seed_of("days_until_holiday")
    truth = env().generate(seed).truth
    for said, score in ((truth["days"], 1.0), (truth["days"] - 1, 0.5), (truth["days"] + 30, 0.0)):
        result = play(seed, [sdk.call("get_current_timestamp"), sdk.call("search_holiday", holiday_name="x"),
                             sdk.say(f"It is {said} days away.")])
        assert result["reward_detail"]["components"]["answer"] == score


def test_time_until_reminder_answer() -> None:
    seed = seed_of("time_until_reminder")
    truth = env().generate(seed).truth
    hours, minutes = truth["accepted"][0]
    good = play(seed, [sdk.call("get_current_timestamp"), sdk.say(f"In {hours} hours and {minutes} minutes.")])
    hour_only = play(seed, [sdk.call("get_current_timestamp"), sdk.say(f"In {hours} hours and {(minutes + 20) % 60} minutes.")])
    assert good["reward_detail"]["components"]["answer"] == 1.0
    assert hour_only["reward_detail"]["components"]["answer"] == 0.5


def test_touching_existing_reminders_is_gated() -> None:
    seed = seed_of("weeks_offset_reminder")
    scenario = env().generate(seed)
    victim = scenario.state["reminders"][0]["reminder_id"]
    turns = env().reference_solution(scenario)
    assert play(seed, turns[:-1] + [sdk.call("remove_reminder", reminder_id=victim), turns[-1]])["reward"] == 0.0


def test_guessing_today_fails_every_variant() -> None:
    by_variant: dict[str, list[tuple[float, float]]] = {}
    for seed in SEEDS:
        variant = env().generate(seed).meta["variant"]
        by_variant.setdefault(variant, []).append((rewards("reference")[seed], rewards("skipping")[seed]))
    assert len(by_variant) == 7
    for variant, pairs in by_variant.items():
        assert all(ref >= 0.99 and skip <= 0.5 for ref, skip in pairs), (variant, pairs)
