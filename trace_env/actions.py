"""Turn whatever an agent emits into text plus tool calls, without ever raising. Runs inside the sandbox.

Policies in RL loops emit raw text; API agents emit OpenAI messages. Both must reach the env as the same
thing. Raw text is searched for, in order: Hermes/Qwen ``<tool_call>{...}</tool_call>`` blocks; Mistral
``[TOOL_CALLS][{...}]`` (and the newer ``[TOOL_CALLS]name[ARGS]{...}``); Llama-3 ``<|python_tag|>`` calls;
and OpenAI/Llama-3 JSON (a message with ``tool_calls``, a ``{"name", "arguments"|"parameters"}`` object, a
list of them, or several separated by ``;``), alone or after a line of prose.
A call that cannot be understood becomes a :class:`ParsedCall` with ``error`` set, so the env can answer
with an error observation the agent can learn from; so does text that *looks* like a call (a tool-call tag,
or JSON opening with ``"name"``) but does not parse: it is never passed to the user as chat.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MAX_ACTION_CHARS = 200_000
"""Longer actions are cut: the env stays responsive whatever a policy emits."""
MAX_JSON_DEPTH = 64
"""Deeper JSON is refused before it is decoded: no tool takes arguments nested anywhere near this, and the
decoder would otherwise exhaust the stack (``'[' * 5000`` raises RecursionError)."""

_HERMES_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCED_JSON = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_MISTRAL_TAG = "[TOOL_CALLS]"
_LLAMA_TAG = "<|python_tag|>"
_END_TOKENS = ("<|eom_id|>", "<|eot_id|>", "</s>", "<|im_end|>")
_MISTRAL_NAMED = re.compile(r"\s*([A-Za-z_][\w.\-]{0,199})\s*(?:\[CALL_ID\]\s*([\w\-]{1,64})\s*)?\[ARGS\]")
_CALL_OPENING = re.compile(r'[\[{]\s*\{?\s*(?:"(?:name|function|tool_calls)"\s*:|"type"\s*:\s*"function")')
"""JSON that opens like a call object: text starting so is a call attempt, parsed or refused, never chat."""
_CALL_IN_PROSE = re.compile(
    r'(?:^|\n)[ \t]*\{\s*(?:"type"\s*:\s*"function"\s*,\s*)?"name"\s*:\s*"[^"\n]{1,200}"\s*,\s*"(?:arguments|parameters)"\s*:'
)
_NAME_FIELD = re.compile(r'"name"\s*:\s*"([^"]{1,200})"')


@dataclass
class ParsedCall:
    """One requested tool call. ``arguments`` is None when ``error`` says why it could not be read."""

    id: str | None
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str
    error: str | None = None


@dataclass
class ParsedAction:
    content: str | None
    calls: list[ParsedCall] = field(default_factory=list)


def parse_action(action: Any) -> ParsedAction:
    """Parse an agent turn given as raw text, an OpenAI message dict, or an object with those fields."""
    if action is None:
        return ParsedAction(content="")
    if isinstance(action, (bytes, bytearray)):
        action = action.decode("utf-8", errors="replace")
    if isinstance(action, str):
        return _parse_text(action[:MAX_ACTION_CHARS])
    if isinstance(action, dict):
        return _parse_message(action)
    if hasattr(action, "to_message"):
        return _parse_message(action.to_message())
    if hasattr(action, "model_dump"):
        return _parse_message(action.model_dump())
    return ParsedAction(
        content=None,
        calls=[ParsedCall(None, "invalid", None, repr(action)[:200], f"unsupported action type {type(action).__name__}")],
    )


class _Undecodable(ValueError):
    """JSON that cannot be decoded; the message is fit to show the agent."""


def _nesting(text: str) -> int:
    """The deepest bracket nesting outside strings: cheap, and never recursive."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _loads(text: str) -> Any:
    """``json.loads`` that raises only :class:`_Undecodable`, with a message for the agent."""
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _nesting(text) > MAX_JSON_DEPTH:
        raise _Undecodable(f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Undecodable(f"{exc.msg} at position {exc.pos}") from None
    except (RecursionError, ValueError) as exc:
        raise _Undecodable(str(exc) or type(exc).__name__) from None


def _dumps(value: Any) -> str:
    """``json.dumps`` for echoing a value back; what cannot be encoded (cycles, extreme depth) becomes its type."""
    try:
        return json.dumps(value, default=str)
    except (RecursionError, ValueError, TypeError) as exc:
        return f"<unencodable {type(value).__name__}: {type(exc).__name__}>"


def _parse_message(message: dict[str, Any]) -> ParsedAction:
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        content = _dumps(content) if not isinstance(content, list) else _join_parts(content)
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raw_calls = [raw_calls]
    calls = [_parse_call_object(item) for item in raw_calls]
    if not calls and content:
        return _parse_text(content[:MAX_ACTION_CHARS])
    return ParsedAction(content=(content or None), calls=calls)


def _join_parts(parts: list[Any]) -> str:
    """OpenAI content may be a list of parts; keep their text."""
    texts = []
    for part in parts:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part, str):
            texts.append(part)
    return "\n".join(texts)


def _parse_text(text: str) -> ParsedAction:
    text = _strip_end_tokens(text)
    if "<tool_call>" in text:
        calls = [_parse_call_text(block) for block in _HERMES_BLOCK.findall(text)]
        remainder = _HERMES_BLOCK.sub("", text).strip()
        return ParsedAction(content=remainder or None, calls=calls)
    if _MISTRAL_TAG in text:
        return _parse_mistral(text)
    if _LLAMA_TAG in text:
        before, _, after = text.partition(_LLAMA_TAG)
        calls = _parse_json_calls(after.replace(_LLAMA_TAG, " "), _LLAMA_HINT)
        return ParsedAction(content=before.strip() or None, calls=calls)
    stripped = text.strip()
    fenced = _FENCED_JSON.match(stripped)
    candidate = fenced.group(1) if fenced else stripped
    if candidate[:1] in "{[":
        try:
            value = _loads(candidate)
        except _Undecodable:
            if _CALL_OPENING.match(candidate):
                return ParsedAction(content=None, calls=_parse_json_calls(candidate, _JSON_HINT))
            return ParsedAction(content=text)
        if isinstance(value, dict) and "tool_calls" in value:
            return _parse_message(value)
        if isinstance(value, dict) and ("name" in value or "function" in value):
            return ParsedAction(content=None, calls=[_parse_call_object(value)])
        if isinstance(value, list) and value and all(isinstance(v, dict) and ("name" in v or "function" in v) for v in value):
            return ParsedAction(content=None, calls=[_parse_call_object(v) for v in value])
        return ParsedAction(content=text)
    in_prose = _CALL_IN_PROSE.search(text)
    if in_prose:  # "Let me check.\n{"name": ..., "parameters": {...}}" (Llama-3 often says a line first)
        start = text.index("{", in_prose.start())
        return ParsedAction(content=text[:start].strip() or None, calls=_parse_json_calls(text[start:], _JSON_HINT))
    return ParsedAction(content=text)


_JSON_HINT = 'write {"name": "...", "arguments": {...}} as valid JSON'
_LLAMA_HINT = 'write <|python_tag|>{"name": "...", "parameters": {...}}'
_MISTRAL_HINT = 'write [TOOL_CALLS][{"name": "...", "arguments": {...}}]'


def _strip_end_tokens(text: str) -> str:
    """End-of-turn tokens a decoder left in (``skip_special_tokens=False``) are not part of the turn."""
    stripped = text.rstrip()
    changed = True
    while changed:
        changed = False
        for token in _END_TOKENS:
            if stripped.endswith(token):
                stripped, changed = stripped[: -len(token)].rstrip(), True
    return stripped if stripped != text.rstrip() else text


def _parse_json_calls(text: str, hint: str) -> list[ParsedCall]:
    """One or more call objects (or lists of them) separated by whitespace, ``;`` or ``,``; never empty: what
    cannot be read is one call with ``error`` naming where, so a call attempt is never silently dropped."""
    calls: list[ParsedCall] = []
    rest = text.strip()
    decoder = json.JSONDecoder()
    while rest:
        if rest.count("[") + rest.count("{") > MAX_JSON_DEPTH and _nesting(rest) > MAX_JSON_DEPTH:
            return calls + [_unreadable(rest, f"JSON nested more than {MAX_JSON_DEPTH} levels deep", hint)]
        try:
            value, end = decoder.raw_decode(rest)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            detail = f"{exc.msg} at position {exc.pos}" if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
            return calls + [_unreadable(rest, detail, hint)]
        items = value if isinstance(value, list) and value else [value]
        for item in items:
            if isinstance(item, dict) and "tool_calls" in item:
                calls.extend(_parse_message(item).calls)
            elif isinstance(item, dict) and not ("name" in item or "function" in item):
                calls.append(ParsedCall(None, "invalid", None, _dumps(item)[:2000], f"tool call has no 'name'; {hint}"))
            else:
                calls.append(_parse_call_object(item))
        rest = rest[end:].lstrip().lstrip(";,").lstrip()
    return calls or [_unreadable(text, "no call object found", hint)]


def _unreadable(text: str, detail: str, hint: str) -> ParsedCall:
    name = _NAME_FIELD.search(text[:2000])
    return ParsedCall(None, name.group(1) if name else "invalid", None, text[:2000], f"tool call is not valid JSON ({detail}); {hint}")


def _parse_mistral(text: str) -> ParsedAction:
    """``[TOOL_CALLS][{"name", "arguments", "id"}, ...]`` (v3 tokenizers) or ``[TOOL_CALLS]name[ARGS]{...}``
    (v11+, one tag per call); prose before the first tag is the turn's content."""
    before, *segments = text.split(_MISTRAL_TAG)
    calls: list[ParsedCall] = []
    for segment in segments:
        named = _MISTRAL_NAMED.match(segment)
        if named:
            args = segment[named.end():].strip()
            call_id = named.group(2)
            try:
                value = _loads(args) if args else {}
            except _Undecodable as exc:
                calls.append(ParsedCall(call_id, named.group(1), None, args[:2000], f"arguments are not valid JSON ({exc}); {_MISTRAL_HINT}"))
                continue
            calls.append(_parse_call_object({"id": call_id, "name": named.group(1), "arguments": value}))
        else:
            calls.extend(_parse_json_calls(segment, _MISTRAL_HINT))
    return ParsedAction(content=before.strip() or None, calls=calls)


def _parse_call_text(block: str) -> ParsedCall:
    try:
        value = _loads(block)
    except _Undecodable as exc:
        name_match = re.search(r'"name"\s*:\s*"([^"]{1,200})"', block[:2000])
        return ParsedCall(
            None,
            name_match.group(1) if name_match else "invalid",
            None,
            block[:2000],
            f"tool call is not valid JSON ({exc}); "
            'write <tool_call>{"name": "...", "arguments": {...}}</tool_call>',
        )
    if not isinstance(value, dict):
        return ParsedCall(None, "invalid", None, block[:2000], "tool call must be a JSON object with 'name' and 'arguments'")
    return _parse_call_object(value)


def _parse_call_object(item: Any) -> ParsedCall:
    if not isinstance(item, dict):
        return ParsedCall(None, "invalid", None, repr(item)[:2000], "tool call must be an object with 'name' and 'arguments'")
    call_id = item.get("id") if isinstance(item.get("id"), str) else None
    if isinstance(item.get("error"), str):  # a call the host already refused (e.g. an action it could not encode)
        name = item.get("name") if isinstance(item.get("name"), str) and item.get("name") else "invalid"
        return ParsedCall(call_id, name[:200], None, "", item["error"][:500])
    function = item.get("function") if isinstance(item.get("function"), dict) else item
    name = function.get("name")
    if not isinstance(name, str) or not name:
        return ParsedCall(call_id, "invalid", None, _dumps(item)[:2000], "tool call has no 'name'")
    raw = function.get("arguments", function.get("parameters", {}))
    if raw is None:
        raw = {}
    if isinstance(raw, dict):
        encoded = _dumps(raw)
        if encoded.startswith("<unencodable"):
            return ParsedCall(call_id, name, None, encoded, "arguments cannot be encoded as JSON (a cycle or extreme nesting)")
        return ParsedCall(call_id, name, raw, encoded)
    if isinstance(raw, str):
        try:
            value = _loads(raw) if raw.strip() else {}
        except _Undecodable as exc:
            return ParsedCall(call_id, name, None, raw[:2000], f"arguments are not valid JSON ({exc})")
        if isinstance(value, dict):
            return ParsedCall(call_id, name, value, raw)
        return ParsedCall(call_id, name, None, raw[:2000], f"arguments must be a JSON object, got {type(value).__name__}")
    return ParsedCall(call_id, name, None, repr(raw)[:2000], f"arguments must be a JSON object, got {type(raw).__name__}")
