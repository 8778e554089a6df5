"""Hypothesis strategies for agent actions against an env's tools.

Validation fuzzes envs with what real policies produce: schema-valid calls (generated from the tool
schemas by hypothesis-jsonschema), schema-invalid calls (a wrong type, a missing required argument, a
non-object) and malformed raw text. (Seeded mixtures of the reference and capability-skipping policies
are in ``fuzz.policies``.) Actions are JSON (``{"content": ..., "calls": [{"name", "arguments"}]}`` or raw text) so they can cross into
a sandbox worker and be replayed as counterexamples.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from trace_env.sdk import canonical_json

Action = dict[str, Any] | str

_WRONG_TYPE_VALUES = st.sampled_from([None, 12345, -1.5, True, "", "not-an-id", [], [1, "a"], {"nested": {"x": 1}}])


@lru_cache(maxsize=None)
def _arguments_strategy(parameters_json: str) -> st.SearchStrategy[dict[str, Any]]:
    import json

    return from_schema(json.loads(parameters_json))


def valid_arguments(tool: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments that validate against the tool's parameter schema."""
    return _arguments_strategy(canonical_json(tool["function"].get("parameters", {"type": "object"})))


@st.composite
def invalid_arguments(draw: st.DrawFn, tool: dict[str, Any]) -> Any:
    """Arguments that break the schema in one of the ways models do."""
    parameters = tool["function"].get("parameters", {})
    properties = list(parameters.get("properties", {}))
    required = list(parameters.get("required", []))
    kinds = ["not_object", "unknown_key"]
    if properties:
        kinds.append("wrong_type")
    if required:
        kinds.append("missing_required")
    kind = draw(st.sampled_from(kinds))
    if kind == "not_object":
        return draw(st.sampled_from([[], "text", 7, None]))
    base = draw(valid_arguments(tool)) if properties else {}
    if kind == "wrong_type":
        key = draw(st.sampled_from(properties))
        base[key] = draw(_WRONG_TYPE_VALUES)
    elif kind == "missing_required":
        base.pop(draw(st.sampled_from(required)), None)
    else:
        base[draw(st.text(min_size=1, max_size=12))] = draw(_WRONG_TYPE_VALUES)
    return base


def tool_call(tools: list[dict[str, Any]], valid: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """One call to one of ``tools``, with valid or invalid arguments."""
    options = []
    for tool in tools:
        args = valid_arguments(tool) if valid else invalid_arguments(tool)
        options.append(args.map(lambda a, name=tool["function"]["name"]: {"name": name, "arguments": a}))
    return st.one_of(options)


def malformed_text() -> st.SearchStrategy[str]:
    """Raw text a broken policy emits: prose, truncated JSON, half tool-call blocks, odd characters."""
    return st.one_of(
        st.text(max_size=300),
        st.just(""),
        st.just("{not json"),
        st.just('<tool_call>{"name": "'),
        st.just("<tool_call></tool_call>"),
        st.text(max_size=60).map(lambda s: f"<tool_call>{s}</tool_call>"),
        st.text(alphabet="{}[]\":,", max_size=50),
        st.integers(1_000, 120_000).map(lambda n: "x" * n),
    )


def turn(tools: list[dict[str, Any]]) -> st.SearchStrategy[Action]:
    """One agent turn: valid calls, invalid calls, text for the user, or malformed text."""
    calls = st.lists(st.one_of(tool_call(tools, True), tool_call(tools, False)), min_size=1, max_size=3)
    return st.one_of(
        calls.map(lambda cs: {"content": None, "calls": cs}),
        st.text(max_size=200).map(lambda text: {"content": text, "calls": []}),
        malformed_text(),
    )


def action_sequences(tools: list[dict[str, Any]], max_turns: int = 12) -> st.SearchStrategy[list[Action]]:
    return st.lists(turn(tools), max_size=max_turns)
