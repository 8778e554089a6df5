"""The episode engine: argument validation, error observations, env-error capture, ending and grading."""

from __future__ import annotations

import math

import pytest

from env_registry import sdk
from trace_env.loader import EnvLoadError, load_env
from trace_env.engine import EnvCodeError, EpisodeRunner, run_episode


@pytest.fixture
def tiny(tiny_source: str) -> sdk.TaskEnv:
    return load_env(tiny_source)


def rid(env: sdk.TaskEnv, seed: int) -> str:
    return env.generate(seed).user["reservation_id"]


def test_reference_and_skipping_scores(tiny: sdk.TaskEnv) -> None:
    for seed in range(20):
        scenario = tiny.generate(seed)
        assert run_episode(tiny, seed, tiny.reference_solution(scenario))["reward"] == 1.0
        skipped = run_episode(tiny, seed, tiny.capability_skipping_solution(scenario))["reward"]
        assert skipped == (0.5 if scenario.truth["cancel"] else 0.0)


def test_schema_violation_is_an_error_observation_and_logged(tiny: sdk.TaskEnv) -> None:
    runner = EpisodeRunner(tiny)
    runner.reset(1)
    result = runner.step(sdk.call("cancel_reservation", reservation_id=5))
    assert result.observation == "[tool cancel_reservation] Error: Invalid arguments for cancel_reservation: reservation_id: 5 is not of type 'string'"
    assert runner.episode.tool_log[-1].ok is False
    assert runner.episode.state == tiny.generate(1).state  # nothing changed


def test_missing_argument_and_unknown_tool(tiny: sdk.TaskEnv) -> None:
    runner = EpisodeRunner(tiny)
    runner.reset(1)
    missing = runner.step(sdk.call("cancel_reservation"))
    assert "'reservation_id' is a required property" in missing.observation
    unknown = runner.step(sdk.call("book_reservation", user_id="x"))
    assert "Tool 'book_reservation' not found" in unknown.observation
    assert "get_reservation_details, cancel_reservation" in unknown.observation


def test_tool_error_uses_target_style(tiny: sdk.TaskEnv) -> None:
    runner = EpisodeRunner(tiny)
    runner.reset(1)
    assert runner.step(sdk.call("get_reservation_details", reservation_id="NOPE00")).observation.endswith("Error: Reservation not found")


def test_tool_crash_is_recorded_as_env_error_not_raised(tiny: sdk.TaskEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object, state: dict, reservation_id: str) -> str:
        raise KeyError("boom")

    monkeypatch.setattr(type(tiny), "get_reservation_details", broken)
    runner = EpisodeRunner(tiny)
    runner.reset(2)
    result = runner.step(sdk.call("get_reservation_details", reservation_id=rid(tiny, 2)))
    assert "Internal error in get_reservation_details" in result.observation
    assert result.info["env_errors"] == [{"where": "tool:get_reservation_details", "error": "KeyError: 'boom'"}]


def test_truncation_at_max_steps_grades_episode(tiny: sdk.TaskEnv) -> None:
    runner = EpisodeRunner(tiny)
    runner.reset(3)
    results = [runner.step(sdk.call("get_reservation_details", reservation_id=rid(tiny, 3))) for _ in range(tiny.max_steps)]
    assert [r.truncated for r in results] == [False] * (tiny.max_steps - 1) + [True]
    assert results[-1].info["ended_by"] == "max_steps"
    assert "reward_components" in results[-1].info
    with pytest.raises(RuntimeError, match="call reset"):
        runner.step("hello")


def test_user_ends_episode_and_reward_comes_at_end(tiny: sdk.TaskEnv) -> None:
    runner = EpisodeRunner(tiny)
    runner.reset(4)
    first = runner.step(sdk.call("get_reservation_details", reservation_id=rid(tiny, 4)))
    assert first.reward == 0.0 and not first.terminated
    last = runner.step("All set, anything else?")  # not a request for facts: the user closes
    assert last.terminated and last.info["ended_by"] == "user"
    assert last.info["reward_components"]["checked"] == 1.0


def test_transcript_is_deterministic(tiny: sdk.TaskEnv) -> None:
    actions = tiny.capability_skipping_solution(tiny.generate(7))
    assert run_episode(tiny, 7, actions) == run_episode(tiny, 7, actions)


def test_raw_number_reward_is_passed_through_unclamped(tiny: sdk.TaskEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(type(tiny), "evaluate", lambda self, episode: 1.7)
    assert run_episode(tiny, 1, [])["reward"] == 1.7


def test_generate_failure_is_env_code_error(tiny: sdk.TaskEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(type(tiny), "generate", lambda self, seed: {"not": "a scenario"})
    with pytest.raises(EnvCodeError, match="must return sdk.Scenario"):
        EpisodeRunner(tiny).reset(0)


def test_reward_aggregation_weights_and_gates() -> None:
    reward = sdk.Reward(components={"a": 1.0, "b": 0.0}, weights={"a": 3.0}, gates={"safe": 1.0})  # (3*1 + 0) / 4
    assert reward.total == 0.75
    assert sdk.Reward(components={"a": 1.0}, gates={"safe": 0.0}).total == 0.0
    assert sdk.Reward(components={"a": float("nan"), "b": 2.0}).total == 0.5
    assert math.isclose(sdk.Reward(components={"a": 0.2}).total, 0.2)


def test_said_compares_numbers_and_text() -> None:
    scenario = sdk.Scenario(seed=0, state={}, user={}, truth={})
    episode = sdk.Episode(scenario=scenario, state={}, messages=[{"role": "assistant", "content": "Refund of $1,204.50 to card ending 4421."}])
    assert episode.said(1204.5) and not episode.said(1204.0)
    assert episode.said("CARD ENDING") and not episode.said("paypal")


def test_scripted_user_answers_questions_then_confirms_then_closes() -> None:
    scenario = sdk.Scenario(seed=0, state={}, user={"facts": [[["user id"], "It is mia_li_3668."]]}, truth={})
    episode = sdk.Episode(scenario=scenario, state={})
    user = sdk.ScriptedUser(facts=[(("user id",), "It is mia_li_3668.")])
    assert user.reply(episode, "Could you tell me your user id?").text == "It is mia_li_3668."
    assert user.reply(episode, "Shall I proceed with the cancellation?").text == "Yes, please go ahead."
    closing = user.reply(episode, "Your user id is on file; the booking is cancelled.")
    assert closing.done


@pytest.mark.parametrize(
    "source, message",
    [
        ("def broken(:\n", "syntax error at line 1"),
        ("raise RuntimeError('nope')", "raised on import: RuntimeError: nope"),
        ("x = 1", "exactly one sdk.TaskEnv subclass"),
    ],
)
def test_load_errors_are_clear(source: str, message: str) -> None:
    with pytest.raises(EnvLoadError, match=message.replace("(", r"\(")):
        load_env(source)


def test_unexpected_argument_is_an_agent_error_not_an_env_error(tiny: sdk.TaskEnv) -> None:
    runner = EpisodeRunner(tiny)
    runner.reset(1)
    result = runner.step(sdk.call("get_reservation_details", reservation_id=rid(tiny, 1), name="x"))
    assert "unexpected argument 'name'" in result.observation
    assert runner.env_errors == []


def test_tool_error_carries_the_exception_name() -> None:
    error = sdk.ToolError("Wifi cannot be turned on in low battery mode", exception="PermissionError")
    assert (str(error), error.exception) == ("Wifi cannot be turned on in low battery mode", "PermissionError")


def test_scripted_user_answers_several_facts_at_once_and_confirms_after_facts() -> None:
    user = sdk.ScriptedUser(facts=[(("user id",), "My user id is ava_1."), (("reason",), "The reason is a health issue.")])
    scenario = sdk.Scenario(seed=0, state={}, user={}, truth={})
    episode = sdk.Episode(scenario=scenario, state={})
    both = user.reply(episode, "Could you share your user id and the reason for cancelling?")
    assert both.text == "My user id is ava_1. The reason is a health issue."
    episode.messages.append({"role": "user", "content": both.text})
    confirm = user.reply(episode, "With the reason you gave, shall I proceed with the cancellation?")
    assert confirm.text == "Yes, please go ahead."


def test_said_after_step() -> None:
    scenario = sdk.Scenario(seed=0, state={}, user={}, truth={})
    messages = [{"role": "assistant", "content": "Total is $40."}, {"role": "user", "content": "ok"},
                {"role": "assistant", "content": "Refund of $12."}]
    episode = sdk.Episode(scenario=scenario, state={}, messages=messages)
    assert episode.said(40) and not episode.said(40, after_step=1) and episode.said(12, after_step=1)
