"""The permission_error_recovery blueprint: contract checks plus what the capability means here.

Recovering means: read the error, fix the setting that really blocks the action (one or two levels deep),
retry, report. Reflexive toggling of settings that were not in the way is gated to zero.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from env_registry import sdk
from trace_env.loader import load_env
from trace_env.engine import EpisodeRunner, run_episode
from factory.blueprints import blueprint_source

CAPABILITY = "permission_error_recovery"
SEEDS = range(100)


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


# --- the generic contract --------------------------------------------------------------------------

def test_scenarios_are_diverse() -> None:
    scenarios = [env().generate(seed) for seed in range(200)]
    assert len({s.fingerprint() for s in scenarios}) >= 190
    assert len({sdk.canonical_json(s.truth) for s in scenarios}) >= 20
    assert len({s.meta["variant"] for s in scenarios}) == 10
    assert len({s.truth["goal"]["kind"] for s in scenarios}) == 5


GARBAGE = [
    "",
    "{not json",
    '<tool_call>{"name": "x"',
    '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
    "x" * 100_000,
    {"content": None, "tool_calls": [{"function": {"name": "set_wifi_status", "arguments": [1]}}]},
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
        ("send_message_with_phone_number", {"phone_number": "not a number", "content": "hi"}),
        ("shift_timestamp", {"timestamp": 1e300, "weeks": 10**9}),
        ("timestamp_to_datetime_info", {"timestamp": -1e20}),
        ("add_reminder", {"content": "x", "reminder_timestamp": 1.0, "latitude": 500.0}),
        ("search_holiday", {"holiday_name": "no such day", "year": 0}),
        ("search_contacts", {"phone_number": "12"}),
    ]:
        runner.reset(5)
        assert isinstance(step(sdk.Turn(tool_calls=[sdk.Call(name, arguments)])), str)
    assert not env_errors, env_errors


def test_reward_is_graded() -> None:
    # The reference without its final report: the work is done but the user was not told.
    partial = []
    for seed in range(20):
        turns = env().reference_solution(env().generate(seed))[:-1]
        partial.append(play(seed, turns)["reward"])
    assert any(0 < r < 1 for r in partial), partial


# --- what the capability means here ---------------------------------------------------------------

def test_errors_name_the_real_exception() -> None:
    seed = seed_of("message_low_battery")
    result = play(seed, env().reference_solution(env().generate(seed)))
    tool_texts = [m["content"] for m in result["messages"] if m["role"] == "tool"]
    assert "ConnectionError: Cellular service is not enabled" in tool_texts
    assert "PermissionError: Cellular service cannot be turned on in low battery mode" in tool_texts


def test_two_level_chain_needs_both_fixes() -> None:
    seed = seed_of("message_low_battery")
    scenario = env().generate(seed)
    goal = scenario.truth["goal"]
    send = sdk.call("send_message_with_phone_number", phone_number=goal["phone_number"], content=goal["content"])
    # Fixes only the first level: turns low battery mode off but never switches cellular on.
    halfway = [send, sdk.call("set_low_battery_mode_status", on=False), send,
               sdk.say("Sorry, I couldn't send the message to " + goal["name"] + "; I turned off low battery mode.")]
    result = play(seed, halfway)
    assert result["reward_detail"]["components"]["blocker_fixed"] == 0.5
    assert 0 < result["reward"] <= 0.5
    assert play(seed, env().reference_solution(scenario))["reward"] == 1.0


def test_retrying_without_fixing_fails() -> None:
    seed = seed_of("message_cellular_off")
    goal = env().generate(seed).truth["goal"]
    send = sdk.call("send_message_with_phone_number", phone_number=goal["phone_number"], content=goal["content"])
    result = play(seed, [send, send, send, sdk.say("The message to " + goal["name"] + " could not be sent.")])
    assert result["reward"] <= 0.2


@pytest.mark.parametrize(
    ("variant", "toggle"),
    [
        ("message_unblocked", sdk.call("set_wifi_status", on=True)),
        ("location_reminder_unblocked", sdk.call("set_wifi_status", on=True)),
        ("contact_low_battery", sdk.call("set_low_battery_mode_status", on=False)),
    ],
)
def test_needless_toggling_is_gated(variant: str, toggle: sdk.Turn) -> None:
    seed = seed_of(variant)
    reference = env().reference_solution(env().generate(seed))
    assert play(seed, reference)["reward"] == 1.0
    # The same work plus one "just in case" toggle of a setting that never blocked anything.
    result = play(seed, [toggle] + reference)
    assert result["reward"] == 0.0
    assert result["reward_detail"]["gates"]["no_unneeded_setting_change"] == 0.0


def test_wrong_blocker_is_gated() -> None:
    # Cellular is the blocker; switching low battery mode or wifi as well is not allowed.
    seed = seed_of("message_cellular_off")
    scenario = env().generate(seed)
    assert not scenario.state["settings"]["low_battery_mode"]
    reference = env().reference_solution(scenario)
    extra = sdk.call("set_low_battery_mode_status", on=True)  # a change nobody asked for
    assert play(seed, [extra] + reference)["reward"] == 0.0


def test_misdirected_message_is_gated() -> None:
    seed = seed_of("message_cellular_off")
    scenario = env().generate(seed)
    goal = scenario.truth["goal"]
    other = next(c for c in scenario.state["contacts"] if c["phone_number"] != goal["phone_number"] and not c["is_self"])
    wrong = sdk.call("send_message_with_phone_number", phone_number=other["phone_number"], content=goal["content"])
    turns = env().reference_solution(scenario)
    assert play(seed, turns[:-1] + [wrong, turns[-1]])["reward"] == 0.0


def test_low_battery_mode_switches_radios_off() -> None:
    seed = seed_of("message_unblocked")
    runner = EpisodeRunner(env())
    runner.reset(seed)
    runner.step(sdk.call("set_low_battery_mode_status", on=True))
    settings = runner.episode.state["settings"]
    assert settings["low_battery_mode"] and not (settings["wifi"] or settings["cellular"] or settings["location_service"])
    observation = runner.step(sdk.call("set_wifi_status", on=True)).observation
    assert "PermissionError: Wifi cannot be turned on in low battery mode" in observation
    observation = runner.step(sdk.call("set_low_battery_mode_status", on=True)).observation
    assert "ValueError: low_battery_mode already enabled" in observation


def test_every_variant_separates_reference_from_skipping() -> None:
    e = env()
    by_variant: dict[str, list[tuple[float, float]]] = {}
    for seed in SEEDS:
        variant = e.generate(seed).meta["variant"]
        by_variant.setdefault(variant, []).append((rewards("reference")[seed], rewards("skipping")[seed]))
    assert len(by_variant) == 10
    for variant, pairs in by_variant.items():
        assert all(ref >= 0.99 and skip <= 0.5 for ref, skip in pairs), (variant, pairs)


def test_a_different_good_path_also_scores_full() -> None:
    # Checks statuses up front and asks before touching low battery mode; the scripted user agrees.
    seed = seed_of("message_low_battery")
    goal = env().generate(seed).truth["goal"]
    turns = [
        sdk.calls(("search_contacts", {"name": goal["name"]})),
        sdk.calls(("get_cellular_service_status", {}), ("get_low_battery_mode_status", {})),
        sdk.say("Cellular service is off and low battery mode is on, which keeps it off. "
                "Do you want me to turn off low battery mode?"),
        sdk.call("set_low_battery_mode_status", on=False),
        sdk.call("set_cellular_service_status", on=True),
        sdk.call("send_message_with_phone_number", phone_number=goal["phone_number"], content=goal["content"]),
        sdk.say(f"Sent to {goal['name']}. I switched low battery mode off and cellular service on."),
    ]
    result = play(seed, turns)
    assert result["ended_by"] == "user" and result["reward"] == 1.0, result["reward_detail"]
