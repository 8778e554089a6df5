"""Every tool-call format a model family emits scores like the Hermes one on a registered env through gym.make;
a turn that tries a call and cannot be read is a visible error (info and transcript), never chat to the user."""

from __future__ import annotations

import json
from collections.abc import Callable

import gymnasium as gym
import pytest

from tests.conftest import TEST_ENVS
from trace_env.actions import parse_action
from trace_env.loader import load_env
from trace_env.sdk import Turn

TINY = load_env((TEST_ENVS / "tiny_cancel.py").read_text())


def hermes(turn: Turn) -> str:
    return "".join(f"<tool_call>{json.dumps({'name': c.name, 'arguments': c.arguments})}</tool_call>" for c in turn.tool_calls)


def llama3_python_tag(turn: Turn) -> str:
    return "<|python_tag|>" + "; ".join(json.dumps({"name": c.name, "parameters": c.arguments}) for c in turn.tool_calls) + "<|eom_id|>"


def llama3_json(turn: Turn) -> str:
    """Llama 3.2's prompted format: the JSON object alone, often after a line of prose."""
    calls = "\n".join(json.dumps({"type": "function", "name": c.name, "parameters": c.arguments}) for c in turn.tool_calls)
    return "I will look into it.\n" + calls


def mistral_v3(turn: Turn) -> str:
    body = [{"name": c.name, "arguments": c.arguments, "id": f"abc{i}defgh"} for i, c in enumerate(turn.tool_calls)]
    return "[TOOL_CALLS]" + json.dumps(body) + "</s>"


def mistral_v11(turn: Turn) -> str:
    return "".join(f"[TOOL_CALLS]{c.name}[ARGS]{json.dumps(c.arguments)}" for c in turn.tool_calls)


FORMATS: dict[str, Callable[[Turn], str]] = {
    "llama3_python_tag": llama3_python_tag, "llama3_json": llama3_json, "mistral_v3": mistral_v3, "mistral_v11": mistral_v11,
}


def play(env_id: str, seed: int, write: Callable[[Turn], str]) -> tuple[float, dict, list[str]]:
    """The env's reference solution, each call turn written in one format; returns reward, components, roles."""
    env = gym.make(env_id)
    try:
        env.reset(seed=seed)
        reward, info = 0.0, {}
        for turn in TINY.reference_solution(TINY.generate(seed)):
            _, reward, terminated, truncated, info = env.step(write(turn) if turn.tool_calls else turn.content)
            assert "call_errors" not in info, info["call_errors"]
            if terminated or truncated:
                break
        if "reward_components" not in info:
            _, reward, *_, info = env.unwrapped.truncate()
        return reward, info["reward_components"], [m["role"] for m in info["messages"]]
    finally:
        env.close()


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_format_scores_like_hermes(tiny_id: str, name: str) -> None:
    seeds = [s for s in range(40) if TINY.generate(s).truth["cancel"]][:1] + [s for s in range(40) if not TINY.generate(s).truth["cancel"]][:1]
    for seed in seeds:
        expected = play(tiny_id, seed, hermes)
        assert expected[0] > 0 and expected[1]["checked"] == 1.0
        assert play(tiny_id, seed, FORMATS[name]) == expected


@pytest.mark.parametrize(
    "broken",
    [
        '<|python_tag|>{"name": "get_reservation_details", "parameters": {"reservation_id": }}',
        '<|python_tag|>get_reservation_details.call(reservation_id="X")',
        '[TOOL_CALLS][{"name": "get_reservation_details", "arguments": {reservation_id: "X"}}]',
        '[TOOL_CALLS]get_reservation_details[ARGS]{"reservation_id": ',
        '{"name": "get_reservation_details", "parameters": {"reservation_id": "X"}',
        'Checking.\n{"name": "get_reservation_details", "arguments": {"reservation_id": "X"',
    ],
)
def test_an_unreadable_call_is_an_error_in_info_and_transcript_not_chat(tiny_id: str, broken: str) -> None:
    env = gym.make(tiny_id)
    try:
        env.reset(seed=3)
        observation, reward, terminated, truncated, info = env.step(broken)
    finally:
        env.close()
    assert info["call_errors"] and "not valid JSON" in info["call_errors"][0]["error"]
    assert [m["role"] for m in info["new_messages"]] == ["tool"]  # the simulated user never saw it
    assert "not valid JSON" in info["new_messages"][0]["content"] and observation.startswith("[tool ")
    assert (reward, terminated, truncated) == (0.0, False, False)


@pytest.mark.parametrize(
    "text",
    ["Your booking is cancelled. {refund: 5 days}", '{"reservation": "ABC"}', "[1, 2, 3] are the options", "Use <|python_tag|"],
)
def test_prose_and_data_stay_chat(text: str) -> None:
    parsed = parse_action(text)
    assert parsed.calls == [] and parsed.content == text


def test_mistral_ids_and_content_before_the_tag_are_kept() -> None:
    parsed = parse_action('Sure. [TOOL_CALLS]a[CALL_ID]k9Z[ARGS]{"x": 1}[TOOL_CALLS]b[ARGS]{}')
    assert parsed.content == "Sure."
    assert [(c.name, c.id, c.arguments) for c in parsed.calls] == [("a", "k9Z", {"x": 1}), ("b", None, {})]
