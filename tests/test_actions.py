"""Parsing of agent turns: every format a policy emits, and garbage that must not raise."""

import json

import pytest

from trace_env.actions import MAX_ACTION_CHARS, parse_action
from trace_env.sdk import call


def test_hermes_blocks_with_surrounding_text() -> None:
    text = (
        "Let me look that up.\n"
        '<tool_call>{"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}</tool_call>\n'
        '<tool_call>\n{"name": "get_reservation_details", "arguments": {"reservation_id": "ABC123"}}\n</tool_call>'
    )
    parsed = parse_action(text)
    assert parsed.content == "Let me look that up."
    assert [c.name for c in parsed.calls] == ["get_user_details", "get_reservation_details"]
    assert parsed.calls[1].arguments == {"reservation_id": "ABC123"}
    assert all(c.error is None for c in parsed.calls)


def test_unclosed_hermes_block_is_still_read() -> None:
    parsed = parse_action('<tool_call>{"name": "calculate", "arguments": {"expression": "2+2"}}')
    assert parsed.calls[0].name == "calculate" and parsed.calls[0].arguments == {"expression": "2+2"}


def test_invalid_json_in_block_becomes_call_error_with_name() -> None:
    parsed = parse_action('<tool_call>{"name": "cancel_reservation", "arguments": {reservation_id: X}}</tool_call>')
    assert parsed.calls[0].name == "cancel_reservation"
    assert parsed.calls[0].arguments is None
    assert "not valid JSON" in parsed.calls[0].error


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "calculate", "arguments": {"expression": "1+1"}}',
        '```json\n{"name": "calculate", "arguments": "{\\"expression\\": \\"1+1\\"}"}\n```',
        '{"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "calculate", "arguments": "{\\"expression\\": \\"1+1\\"}"}}]}',
        '[{"name": "calculate", "arguments": {"expression": "1+1"}}]',
    ],
)
def test_openai_style_json_text(text: str) -> None:
    parsed = parse_action(text)
    assert len(parsed.calls) == 1
    assert parsed.calls[0].name == "calculate"
    assert parsed.calls[0].arguments == {"expression": "1+1"}


def test_structured_message_and_sdk_turn() -> None:
    message = {"role": "assistant", "content": None, "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": {"a": 1}}}]}
    assert parse_action(message).calls[0].arguments == {"a": 1}
    turn = call("get_user_details", user_id="u1")
    parsed = parse_action(turn)
    assert parsed.calls[0].name == "get_user_details" and parsed.calls[0].arguments == {"user_id": "u1"}


@pytest.mark.parametrize(
    "garbage",
    ["", "   ", "{not json", "[1, 2", "null", 42, None, b"\xff\xfe", {"tool_calls": "oops"}, {"tool_calls": [5]},
     {"tool_calls": [{"function": {"name": "f", "arguments": [1, 2]}}]}, {"content": {"weird": True}}, object()],
)
def test_garbage_never_raises(garbage: object) -> None:
    parsed = parse_action(garbage)
    for c in parsed.calls:
        assert c.arguments is not None or c.error


def test_plain_prose_is_content() -> None:
    parsed = parse_action("Your flight is cancelled. {Note: refund in 5 days}")
    assert parsed.calls == [] and parsed.content.startswith("Your flight")


def test_huge_text_is_capped() -> None:
    parsed = parse_action("a" * (MAX_ACTION_CHARS * 2))
    assert len(parsed.content) == MAX_ACTION_CHARS


def test_arguments_must_be_object() -> None:
    parsed = parse_action({"tool_calls": [{"function": {"name": "f", "arguments": json.dumps([1])}}]})
    assert parsed.calls[0].error == "arguments must be a JSON object, got list"


@pytest.mark.parametrize(
    "action",
    ["[" * 5000, "[" * 5000 + "]" * 5000, '{"a":' * 3000, "<tool_call>" + "[" * 5000 + "</tool_call>",
     {"tool_calls": [{"function": {"name": "f", "arguments": "[" * 5000}}]}],
)
def test_deeply_nested_json_never_raises(action: object) -> None:
    parsed = parse_action(action)
    for c in parsed.calls:
        assert c.arguments is None and "nested more than 64 levels" in (c.error or "")


def test_unencodable_python_objects_become_call_errors() -> None:
    cyclic: dict = {}
    cyclic["self"] = cyclic
    parsed = parse_action({"tool_calls": [{"function": {"name": "f", "arguments": cyclic}}]})
    assert parsed.calls[0].error == "arguments cannot be encoded as JSON (a cycle or extreme nesting)"
    assert parse_action({"content": cyclic}).content.startswith("<unencodable dict")


def test_a_call_the_host_refused_keeps_its_reason() -> None:
    parsed = parse_action({"tool_calls": [{"name": "invalid", "error": "the action could not be encoded as JSON (ValueError)"}]})
    assert parsed.calls[0].arguments is None and parsed.calls[0].error.startswith("the action could not be encoded")


def test_nesting_inside_strings_does_not_count() -> None:
    text = json.dumps({"name": "calculate", "arguments": {"expression": "[" * 500 + "{" * 500}})
    assert parse_action(text).calls[0].arguments == {"expression": "[" * 500 + "{" * 500}
