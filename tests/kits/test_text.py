"""The wording helpers rewards and scripted users share: normalising, matching, scripted answers, agent turns."""

from __future__ import annotations

from trace_env import sdk
from trace_env.kits import text


def episode_with(*messages: dict) -> sdk.Episode:
    user = {"answers": [text.fact("user_id", ["user id"], "It's mia_li_3668."),
                        text.fact("reason", ["reason"], "I'm ill.", given_upfront=True)],
            "confirm": "Yes, go ahead.", "closing": "Bye."}
    return sdk.Episode(scenario=sdk.Scenario(seed=0, state={}, user=user, truth={}), state={}, messages=list(messages))


def test_normalise_and_matchers() -> None:
    said = text.normalise("We\u2019ve  CANCELED it;\nthe cancelation is done")
    assert said == "we've cancelled it; the cancellation is done"
    assert text.has_any(said, ["cancelled"]) and not text.has_any(said, ["refund"])
    assert text.hits_groups("no insurance, booked 2 days ago, not within 24 hours", [["24 hours"], ["insurance"]])
    assert not text.hits_groups("no insurance", [["24 hours"], ["insurance"]])
    assert text.asks_confirmation("Shall I proceed?") and not text.asks_confirmation("I will proceed.")
    assert text.fuzzy("ravi", "Ravi Sato") and text.fuzzy("sat", "Ravi Sato") and not text.fuzzy("raj", "Ravi Sato")
    assert text.overlap("pick up the cake", "Pick up cake") == 0.75
    assert text.money(1204) == "$1,204" and text.money(12.5) == "$12.50" and text.nice_date("2024-05-07") == "May 7"


def test_scripted_answers_are_given_once_and_repeated_only_when_asked_outright() -> None:
    facts = episode_with().scenario.user["answers"]
    assert text.answers_to("what is your user id?", facts, []) == ["It's mia_li_3668."]
    assert text.answers_to("what is your user id?", facts, ["It's mia_li_3668."]) == ["It's mia_li_3668."]
    assert text.answers_to("your user id, shall i proceed?", facts, ["It's mia_li_3668."]) == []
    assert text.answers_to("what is your user id?", facts, ["It's mia_li_3668.", "It's mia_li_3668."]) == []
    assert text.answers_to("i noted the reason.", facts, []) == []  # given up front: repeated only when asked
    assert text.answers_to("what is the reason for it?", facts, ["x"]) == ["I'm ill."]


def test_answer_or_confirm_and_agent_turns() -> None:
    episode = episode_with({"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
                           {"role": "assistant", "content": "Your USER ID?"}, {"role": "user", "content": "It's x."},
                           {"role": "assistant", "content": None, "tool_calls": [{}]}, {"role": "tool", "content": "{}"},
                           {"role": "assistant", "content": "Done."})
    assert text.agent_turns(episode) == [[1, "your user id?", "It's x."], [2, "", None], [3, "done.", None]]
    assert text.answer_or_confirm(episode, "What's your user id?", episode.scenario.user, 5).text == "It's mia_li_3668."
    assert text.answer_or_confirm(episode, "Shall I go ahead?", episode.scenario.user, 5).text == "Yes, go ahead."
    assert text.answer_or_confirm(episode, "   ", episode.scenario.user, 5).text.startswith("Sorry")
    assert text.answer_or_confirm(episode, "All done.", episode.scenario.user, 5) is None
    episode.user_turns = 5
    assert text.answer_or_confirm(episode, "Shall I?", episode.scenario.user, 5).done
