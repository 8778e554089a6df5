"""τ²'s reward rules, the NL judge and the simulated users; LLMs are the scripted server behind the real SDKs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from env_registry.targets.backend import Replay
from env_registry.targets.env import make_judge
from env_registry.targets.reward import grade_episode
from env_registry.targets.tasks import Task, parse_tasks
from env_registry.targets.users import GREETING, ScriptedTaskUser, UserSimulatorError, flip_roles, user_factory
from factory.testing.llm_server import ScriptedLLMServer, ScriptedReply


def make_task(**criteria: Any) -> Task:
    raw = {
        "id": "t1",
        "user_scenario": {
            "persona": "Calm.",
            "instructions": {
                "domain": "airline",
                "reason_for_call": "You want to cancel reservation ABC123.",
                "known_info": "You are Mia Li, user id mia_li_3668.",
                "unknown_info": "You do not know the flight number.",
                "task_instructions": "Do not accept a voucher.",
            },
        },
        "evaluation_criteria": {"actions": [{"name": "cancel_reservation", "arguments": {"reservation_id": "ABC123"}}], **criteria},
    }
    return parse_tasks([raw], "test")[0]


def said(*texts: str, calls: list[tuple[str, dict[str, Any]]] = ()) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "policy"}, {"role": "user", "content": "hi"}]
    for name, arguments in calls:
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]})
    messages += [{"role": "assistant", "content": text} for text in texts]
    return messages


def grade(task: Task, messages: list[dict[str, Any]], termination: str = "user_stop", end: str | None = "h1", gold: str | None = "h1", judge: Any = None) -> dict[str, Any]:
    return grade_episode(task, messages, termination, final_hash=lambda: end, gold=lambda: Replay(gold), judge=judge)


def test_db_and_communicate_multiply() -> None:
    task = make_task(communicate_info=["1628"], reward_basis=["DB", "COMMUNICATE"])
    assert grade(task, said("The refund is $1,628."))["total"] == 1.0  # τ² drops commas from the message
    wrong_db = grade(task, said("1628"), end="h2")
    assert (wrong_db["total"], wrong_db["gates"]) == (0.0, {"DB": 0.0, "COMMUNICATE": 1.0})
    silent = grade(task, said("Done."))
    assert silent["total"] == 0.0 and silent["communicate_checks"] == [{"info": "1628", "met": False}]


def test_action_basis_uses_the_agents_tool_calls() -> None:
    task = make_task(reward_basis=["ACTION"])
    assert grade(task, said(calls=[("cancel_reservation", {"reservation_id": "ABC123"})]))["total"] == 1.0
    assert grade(task, said(calls=[("cancel_reservation", {"reservation_id": "XYZ"})]))["total"] == 0.0


def test_premature_endings_score_zero_as_in_tau2() -> None:
    detail = grade(make_task(), said("x"), termination="max_steps")
    assert detail["total"] == 0.0 and "premature" in detail["notes"]


def test_unreadable_state_and_missing_judge_are_reported_not_guessed() -> None:
    unreadable = grade(make_task(reward_basis=["DB"]), said("x"), end=None, gold=None)
    assert unreadable["total"] == 0.0 and unreadable["fully_judged"] is False and "DB" in unreadable["not_judged"]
    task = make_task(nl_assertions=["Agent refuses the voucher politely."], reward_basis=["DB", "NL_ASSERTION"])
    partial = grade(task, said("Cancelled."))
    assert partial["total"] == 1.0 and partial["gates"] == {"DB": 1.0}
    assert partial["fully_judged"] is False and "need an LLM judge" in partial["not_judged"]["NL_ASSERTION"]
    none_to_judge = grade(make_task(nl_assertions=[], reward_basis=["NL_ASSERTION"]), said("x"))
    assert none_to_judge["total"] == 1.0 and none_to_judge["fully_judged"] is True


def _verdicts(*met: bool) -> str:
    return json.dumps({"results": [{"expectedOutcome": f"o{i}", "reasoning": "r", "metExpectation": m} for i, m in enumerate(met)]})


@pytest.mark.parametrize("met,total", [((True, True), 1.0), ((True, False), 0.0)])
def test_the_llm_judge_grades_each_assertion(monkeypatch: pytest.MonkeyPatch, met: tuple[bool, ...], total: float) -> None:
    task = make_task(nl_assertions=["Agent cancels ABC123.", "Agent refuses the voucher."], reward_basis=["DB", "NL_ASSERTION"])
    with ScriptedLLMServer(["Sure! " + _verdicts(*met)]) as server:
        monkeypatch.setenv("TRACE_LLM_BASE_URL", server.openai_base_url)
        detail = grade(task, said("I cancelled ABC123.", calls=[("cancel_reservation", {"reservation_id": "ABC123"})]), judge=make_judge("compat:judge"))
        prompt = server.requests[0].prompt_text()
    assert detail["total"] == total and detail["fully_judged"] is True
    assert [c["met"] for c in detail["nl_checks"]] == list(met)
    assert detail["judged_by"]["NL_ASSERTION"] == "LLM judge openai-compatible:judge, one verdict per assertion"
    assert "assistant: I cancelled ABC123." in prompt and "[tool calls] cancel_reservation" in prompt and "2. Agent refuses the voucher." in prompt


def test_a_judge_that_never_answers_properly_leaves_the_part_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    task = make_task(nl_assertions=["Agent cancels ABC123."], reward_basis=["NL_ASSERTION"])
    with ScriptedLLMServer(["no json here", _verdicts(True, True), "still nothing"]) as server:
        monkeypatch.setenv("TRACE_LLM_BASE_URL", server.openai_base_url)
        detail = grade(task, said("ok"), judge=make_judge("compat:judge"))
    assert detail["total"] == 0.0 and detail["fully_judged"] is False
    assert detail["not_judged"]["NL_ASSERTION"].startswith("the judge failed")


def test_scripted_user_opens_answers_confirms_and_stops() -> None:
    user = ScriptedTaskUser(make_task())
    opening = user.opening()
    assert opening == "You want to cancel reservation ABC123. You are Mia Li, user id mia_li_3668."
    conversation = [{"role": "system", "content": "p"}, {"role": "user", "content": opening}]

    def turn(text: str) -> Any:
        conversation.append({"role": "assistant", "content": text})
        reply = user.reply(conversation)
        conversation.append({"role": "user", "content": reply.text})
        return reply

    assert turn("Could you give me your user id?").text == "You are Mia Li, user id mia_li_3668."
    assert turn("Shall I go ahead and cancel it?").text == "Yes, please go ahead."
    final = turn("Your reservation is cancelled.")
    assert final.done and "###STOP###" in final.text


def test_llm_user_plays_the_scenario_and_stops_on_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    replies = ["I'd like to cancel reservation ABC123.", "My user id is mia_li_3668.", "Thanks! ###STOP###"]
    with ScriptedLLMServer(list(replies)) as server:
        monkeypatch.setenv("TRACE_LLM_BASE_URL", server.openai_base_url)
        user = user_factory("compat:user-model")(make_task(), 0)
        conversation = [{"role": "system", "content": "agent policy"}, {"role": "user", "content": user.opening()}]
        conversation += [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "1", "name": "x", "content": "SECRET TOOL OUTPUT"},
            {"role": "assistant", "content": "What is your user id?"},
        ]
        second = user.reply(conversation)
        conversation += [{"role": "user", "content": second.text}, {"role": "assistant", "content": "Cancelled."}]
        last = user.reply(conversation)
        requests = server.requests
    assert conversation[1]["content"] == replies[0] and not second.done and last.done
    body = requests[1].body
    system = body["messages"][0]["content"]
    assert body["messages"][0]["role"] == "system" and "Do not accept a voucher." in system and "mia_li_3668" in system
    assert "agent policy" not in system
    assert [m["role"] for m in body["messages"][1:]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == GREETING and "SECRET TOOL OUTPUT" not in json.dumps(body)


def test_llm_user_failure_is_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLMServer([ScriptedReply(status=400, text="bad request")]) as server:
        monkeypatch.setenv("TRACE_LLM_BASE_URL", server.openai_base_url)
        user = user_factory("compat:user-model")(make_task(), 0)
        with pytest.raises(UserSimulatorError, match="simulated user .* failed"):
            user.opening()


def test_flip_roles_alternates_for_every_chat_api() -> None:
    conversation = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1"},
        {"role": "assistant", "content": "a2"},
        {"role": "tool", "content": "t"},
        {"role": "user", "content": "u2"},
    ]
    dialogue = flip_roles(conversation)
    assert [m["role"] for m in dialogue] == ["user", "assistant", "user", "assistant"]
    assert dialogue[2]["content"] == "a1\n\na2"

