"""Hypothesis strategies for agent actions against an env's tools.

Two kinds of fuzzing, because defects hide in two places:

- garbage, what broken policies produce: schema-valid calls with random values, schema-invalid calls (a
  wrong type, a missing required argument, a non-object) and malformed raw text;
- realistic play, what reaches the states a reward is computed from: call-only turns whose arguments are
  values of the scenario or of earlier tool results (templates like ``{"$pool": 3, "type": "string"}``,
  resolved inside the sandbox by ``trace_env.gate_probe``), the same values changed in one character
  (well-formed but unknown ids), repeated calls (``{"$repeat": j}``), questions, and final answers.

Actions are JSON (``{"content": ..., "calls": [{"name", "arguments"}]}`` or raw text) so they can cross
into a sandbox worker and be replayed as counterexamples. (Seeded mixtures of the reference and
capability-skipping policies are in ``fuzz.policies``.)
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from trace_env.sdk import canonical_json

Action = dict[str, Any] | str

_WRONG_TYPE_VALUES = st.sampled_from([None, 12345, -1.5, True, "", "not-an-id", [], [1, "a"], {"nested": {"x": 1}}])
_POOL_INDEX = st.integers(min_value=0, max_value=400)
_COMPOSITE = ("allOf", "anyOf", "oneOf", "not", "if", "dependentSchemas", "dependentRequired", "patternProperties", "dependencies")


def _inline(schema: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    """The schema with local ``$ref``s to ``$defs`` replaced by their targets (tool schemas nest shallowly)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs:
            return _inline(defs[ref[8:]], defs, depth + 1) if depth < 4 else {"type": "object"}  # recursive types: cut
        return {k: _inline(v, defs, depth) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inline(v, defs, depth) for v in schema]
    return schema


def _is_plain_object(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "object" and isinstance(schema.get("properties", {}), dict) and not any(k in schema for k in _COMPOSITE)


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]] | None:
    """``anyOf``/``oneOf`` as a list of merged alternatives (for fuzzing, oneOf's exclusivity is moot)."""
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options and not any(k in schema for k in _COMPOSITE if k != key):
            rest = {k: v for k, v in schema.items() if k != key}
            return [{**rest, **option} for option in options if isinstance(option, dict)]
    return None


def _value_strategy(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of one schema. Plain objects are assembled property by property with ``fixed_dictionaries``
    and alternatives with ``one_of`` (an order of magnitude faster than hypothesis-jsonschema's general
    object strategy, which re-merges schemas on every draw); every leaf and anything unusual is left to
    hypothesis-jsonschema."""
    branches = _branches(schema)
    if branches:
        return st.one_of([_value_strategy(b) for b in branches])
    if _is_plain_object(schema):
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {k: _value_strategy(v) for k, v in properties.items() if k in required},
            optional={k: _value_strategy(v) for k, v in properties.items() if k not in required},
        )
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict) and not any(k in schema for k in _COMPOSITE):
        return st.lists(_value_strategy(schema["items"]), min_size=int(schema.get("minItems", 0)), max_size=min(int(schema.get("maxItems", 3)), 3))
    return from_schema(schema)


@lru_cache(maxsize=None)
def _arguments_strategy(parameters_json: str) -> st.SearchStrategy[dict[str, Any]]:
    schema = json.loads(parameters_json)
    return _value_strategy(_inline(schema, schema.get("$defs", {})))


def _parameters(tool: dict[str, Any]) -> dict[str, Any]:
    return tool["function"].get("parameters") or {"type": "object", "properties": {}}


def valid_arguments(tool: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments that validate against the tool's parameter schema."""
    return _arguments_strategy(canonical_json(_parameters(tool)))


@st.composite
def invalid_arguments(draw: st.DrawFn, tool: dict[str, Any]) -> Any:
    """Arguments that break the schema in one of the ways models do."""
    parameters = _parameters(tool)
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


# --- realistic play ---------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def pool_value(kind: str, key: str = "") -> st.SearchStrategy[dict[str, Any]]:
    """A template naming a value the agent could have seen: of the scenario, of an earlier tool result
    (``from: seen``), or either changed in one character (``mutate``: well-formed but unknown). ``key``,
    the argument's name, makes the sandbox prefer values found under that name."""
    return st.builds(
        lambda index, source, mutate: {
            "$pool": index, "type": kind, **({"key": key} if key else {}), **({"from": "seen"} if source else {}),
            **({"mutate": True} if mutate else {}),
        },
        _POOL_INDEX, st.booleans(), st.booleans(),
    )


def _template_strategy(schema: dict[str, Any], key: str = "") -> st.SearchStrategy[Any]:
    branches = _branches(schema)
    if branches:
        return st.one_of([_template_strategy(b, key) for b in branches])
    kind = schema.get("type")
    if "enum" in schema or kind == "boolean" or kind is None:
        return _value_strategy(schema)
    if _is_plain_object(schema):
        properties, required = schema.get("properties", {}), set(schema.get("required", []))
        return st.fixed_dictionaries(
            {k: _template_strategy(v, k) for k, v in properties.items() if k in required},
            optional={k: _template_strategy(v, k) for k, v in properties.items() if k not in required},
        )
    if kind == "array" and isinstance(schema.get("items"), dict):
        return st.lists(_template_strategy(schema["items"], key), min_size=1, max_size=3)
    if kind in ("string", "integer", "number"):
        return st.one_of(pool_value(kind, key), pool_value(kind, key), pool_value(kind, key), _value_strategy(schema))
    return _value_strategy(schema)


@lru_cache(maxsize=None)
def _template_arguments(parameters_json: str) -> st.SearchStrategy[dict[str, Any]]:
    schema = json.loads(parameters_json)
    return _template_strategy(_inline(schema, schema.get("$defs", {})))


def realistic_call(tools: list[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return _realistic_calls(canonical_json(tools))


@lru_cache(maxsize=64)
def _realistic_calls(tools_json: str) -> st.SearchStrategy[dict[str, Any]]:
    tools = json.loads(tools_json)
    return st.one_of([
        _template_arguments(canonical_json(_parameters(tool))).map(lambda a, name=tool["function"]["name"]: {"name": name, "arguments": a})
        for tool in tools
    ])


_KINDS_FIRST = st.sampled_from(["call"] * 6 + ["question", "answer"])
_KINDS = st.sampled_from(["call"] * 6 + ["repeat"] * 2 + ["question", "answer"])
_QUESTION = pool_value("string").map(lambda v: {"content": ["Could you tell me more about", v, "?"], "calls": []})
_ANSWER = st.one_of(pool_value("string"), pool_value("number")).map(lambda v: {"content": ["All done: the answer is", v, "."], "calls": []})


def realistic_sequences(tools: list[dict[str, Any]], max_turns: int = 10) -> st.SearchStrategy[list[Action]]:
    """Turns a real policy plays: mostly call-only turns on real values, so the episode goes on; repeats of
    earlier turns; now and then a question or a final answer naming a value."""
    one_call = realistic_call(tools).map(lambda c: {"content": None, "calls": [c]})
    calls = st.one_of(one_call, one_call, one_call, st.lists(realistic_call(tools), min_size=2, max_size=2).map(lambda cs: {"content": None, "calls": cs}))
    count = st.integers(min_value=1, max_value=max_turns)
    earlier = [st.integers(min_value=0, max_value=max(0, i - 1)) for i in range(max_turns)]

    @st.composite
    def sequences(draw: st.DrawFn) -> list[Action]:
        turns: list[Action] = []
        for index in range(draw(count)):
            kind = draw(_KINDS if index else _KINDS_FIRST)
            if kind == "call":
                turns.append(draw(calls))
            elif kind == "repeat":
                turns.append({"$repeat": draw(earlier[index])})
            else:
                turns.append(draw(_QUESTION if kind == "question" else _ANSWER))
        return turns

    return sequences()
