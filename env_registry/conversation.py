"""How a model sees a conversation with tools: the one rendering used by training, rollout, evaluation,
routing and calibration. Host side.

A conversation is OpenAI-format messages plus tool schemas. Two kinds of reader see it:

* a **chat template** (a tokenizer's ``apply_chat_template``): the template renders what it can, and what
  it cannot is written into the text in the Hermes format. A template that does not render tool schemas
  (SmolLM2's, for one) gets the tool list and the call syntax appended to the system message; a template
  that does not render assistant tool calls gets each call inlined as a ``<tool_call>`` block and each
  tool result as a ``<tool_response>`` user turn. What a template supports is probed once (:func:`probe`).
* a **text-only chat API** (``llm_clients`` clients exchange text): the same Hermes text, as a system
  string plus a dialogue whose same-role neighbours are joined (some APIs require alternating roles).

``compact=True`` writes each tool as one signature line (name, parameters with their types, the first
sentence of its description) instead of its JSON schema, for every reader: on a small model's budget the
schemas are most of the prompt (19 ToolSandbox tools: ~9k characters), and the policy a capability needs
is in the system prompt, not in the schemas' free text.

The policy's reply is text either way: :func:`reply_text` turns generated token ids into it, and the env
parses ``<tool_call>`` blocks (``trace_env.actions``). Nothing here imports torch or transformers; the
tokenizer is passed in, so trainer/ and router/ (neither of which may import the other) both use it.

An adapter must be shown conversations the way it was trained on them, so ``factory train`` records the
rendering next to the adapter (:class:`TrainedPrompt`, ``trained_prompt.json`` in the adapter folder) and
everything that generates with an adapter reads it back (:func:`trained_prompt`, :func:`tools_mode`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from schemas.errors import InputError
from schemas.files import read_state, read_train_run, write_atomic

TOOL_PROTOCOL = """# Tools
You can call these functions. To call one, write a block like
<tool_call>{{"name": "<function name>", "arguments": {{<arguments as JSON>}}}}</tool_call>
(several blocks for several calls). The results come back as <tool_response> messages. To talk to the
user instead, write plain text with no <tool_call> block.
<tools>
{tools}
</tools>"""


@dataclass(frozen=True)
class TemplateSupport:
    """What a chat template renders by itself: tool schemas (``tools=``) and assistant ``tool_calls``."""

    tools: bool
    calls: bool


TEXT_ONLY = TemplateSupport(tools=False, calls=False)
"""A reader that sees only text (an API through ``llm_clients``, or a template that renders neither)."""

_PROBE_TOOL = {"type": "function", "function": {"name": "probe_tool_x", "description": "", "parameters": {"type": "object", "properties": {}}}}
_PROBE_CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "probe_call_y", "arguments": {}}}]}


def probe(tokenizer: Any) -> TemplateSupport:
    """Does the tokenizer's chat template render tool schemas, and assistant tool calls?"""
    user = [{"role": "user", "content": "hi"}]
    try:
        with_tools = tokenizer.apply_chat_template(user, tools=[_PROBE_TOOL], tokenize=False)
        with_call = tokenizer.apply_chat_template(user + [_PROBE_CALL], tokenize=False)
    except Exception:  # noqa: BLE001 - a template that rejects the probe renders neither
        return TEXT_ONLY
    return TemplateSupport(tools="probe_tool_x" in str(with_tools), calls="probe_call_y" in str(with_call))


def tool_text(tools: list[dict[str, Any]], compact: bool = False) -> str:
    """The tool list and the call syntax, for a reader that is not shown tools any other way."""
    lines = [signature(t) if compact else json.dumps(t, ensure_ascii=False) for t in tools]
    return TOOL_PROTOCOL.format(tools="\n".join(lines))


def signature(tool: dict[str, Any]) -> str:
    """``name(required: type, optional?: type) - First sentence of the description.``"""
    function = tool.get("function") or {}
    parameters = function.get("parameters") or {}
    required = set(parameters.get("required") or [])
    args = []
    for name, schema in (parameters.get("properties") or {}).items():
        kind = schema.get("type", "any") if isinstance(schema, dict) else "any"
        args.append(f"{name}{'' if name in required else '?'}: {'|'.join(kind) if isinstance(kind, list) else kind}")
    description = " ".join(str(function.get("description") or "").split())
    first = description.split(". ")[0].rstrip(".")
    return f"{function.get('name')}({', '.join(args)})" + (f" - {first}." if first else "")


def parsed_arguments(call: dict[str, Any]) -> dict[str, Any]:
    """The call with JSON-string arguments as an object (templates such as Qwen's ``tojson`` them); a
    string that is not JSON is kept as it is."""
    function = dict(call.get("function") or {})
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            function["arguments"] = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            pass
    return {**call, "function": function}


def call_block(call: dict[str, Any]) -> str:
    function = parsed_arguments(call).get("function", {})
    return "<tool_call>" + json.dumps({"name": function.get("name"), "arguments": function.get("arguments")}, ensure_ascii=False) + "</tool_call>"


def result_block(message: dict[str, Any]) -> str:
    return f"<tool_response name={json.dumps(message.get('name'))}>\n{message.get('content') or ''}\n</tool_response>"


def prepare(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, support: TemplateSupport, compact: bool = False,
) -> list[dict[str, Any]]:
    """The messages a template (or a text API) is given: content never None, call arguments as objects,
    and whatever the reader cannot render written into the text."""
    out: list[dict[str, Any]] = []
    for message in messages:
        item = {k: v for k, v in message.items() if v is not None}
        item["content"] = item.get("content") or ""
        calls = [parsed_arguments(c) for c in message.get("tool_calls") or []]
        if calls and not support.calls:
            item.pop("tool_calls", None)
            item["content"] = "\n".join([*([item["content"]] if item["content"] else []), *(call_block(c) for c in calls)])
        elif calls:
            item["tool_calls"] = calls
        if item.get("role") == "tool" and not support.calls:
            item = {"role": "user", "content": result_block(message)}
        out.append(item)
    if tools and (compact or not support.tools):
        text = tool_text(tools, compact)
        if out and out[0].get("role") == "system":
            out[0] = {**out[0], "content": (out[0]["content"] + "\n\n" if out[0]["content"] else "") + text}
        else:
            out.insert(0, {"role": "system", "content": text})
    return out


def render(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, support: TemplateSupport,
    generation_prompt: bool, compact: bool = False, **template_kwargs: Any,
) -> str:
    """The conversation through the tokenizer's chat template. Template errors propagate (callers decide)."""
    return str(tokenizer.apply_chat_template(
        prepare(messages, tools, support, compact), tools=(tools or None) if support.tools and not compact else None,
        tokenize=False, add_generation_prompt=generation_prompt, **template_kwargs,
    ))


def text_dialogue(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, compact: bool = False,
) -> tuple[str, list[dict[str, str]]]:
    """The conversation for a text-only chat API: (system text with the tools, alternating user/assistant
    turns). Tool results become ``<tool_response>`` user turns; same-role neighbours are joined."""
    prepared = prepare(messages, tools or [], TEXT_ONLY, compact)
    system = "\n\n".join(m["content"] for m in prepared if m.get("role") == "system")
    dialogue: list[dict[str, str]] = []
    for message in prepared:
        role = message.get("role")
        if role == "system":
            continue
        speaker = "assistant" if role == "assistant" else "user"
        if dialogue and dialogue[-1]["role"] == speaker:
            dialogue[-1]["content"] += "\n\n" + message["content"]
        else:
            dialogue.append({"role": speaker, "content": message["content"]})
    return system, dialogue


def reply_text(tokenizer: Any, generated: list[int], eos_id: int) -> str:
    """What the env receives for a generated turn: the tokens up to the first eos, decoded without special
    tokens (the env parses ``<tool_call>`` blocks from this text)."""
    ids = generated[: generated.index(eos_id)] if eos_id in generated else generated
    return str(tokenizer.decode(ids, skip_special_tokens=True))


# --- the rendering an adapter was trained with ---------------------------------------------------------
PROMPT_FILE = "trained_prompt.json"
"""Written by ``factory train`` into every adapter folder it saves (final adapter and checkpoints)."""


class TrainedPrompt(BaseModel):
    """How the conversations an adapter was trained on were rendered; generating with the adapter renders the same."""

    model_config = ConfigDict(extra="forbid")

    compact_tools: bool = Field(description="tools as one signature line each (True) or as JSON schemas (False)")


_REWRITE = 'write it as {"compact_tools": true} or false, as the adapter was trained (its run\'s rollout.compact_tools)'


class PromptRecordError(InputError):
    """An adapter's record of its training prompt cannot be read; the message names the file and the fix."""


def write_trained_prompt(adapter_dir: str | Path, prompt: TrainedPrompt) -> Path:
    path = Path(adapter_dir) / PROMPT_FILE
    write_atomic(path, prompt.model_dump_json(indent=2) + "\n")
    return path


def trained_prompt(adapter_dir: str | Path) -> TrainedPrompt | None:
    """The rendering ``adapter_dir`` was trained with: its ``trained_prompt.json``, else (an adapter saved before
    that file existed) ``rollout.compact_tools`` of the ``run.json`` of the ``factory train`` run it sits in;
    None when neither says (an adapter from elsewhere: the default rendering)."""
    folder = Path(adapter_dir).expanduser()
    path = folder / PROMPT_FILE
    if path.is_file():
        return read_state(path, TrainedPrompt, _REWRITE, PromptRecordError)
    try:
        run = read_train_run(folder.parent, _REWRITE, PromptRecordError)  # the one reader of a run's run.json
    except PromptRecordError:
        return None  # not a `factory train` run.json: nothing it says about this adapter
    rollout = run.config.get("rollout", {}) if run is not None else None
    value = rollout.get("compact_tools", False) if isinstance(rollout, dict) else None
    return TrainedPrompt(compact_tools=value) if isinstance(value, bool) else None


def tools_mode(trained: TrainedPrompt | None, flag: bool | None, adapter: str | None = None) -> tuple[bool, str | None]:
    """Whether to render tools compactly, and a warning when an explicit ``flag`` differs from the training.

    No flag: the adapter's training rendering (JSON schemas for the base model or an adapter with no record)."""
    trained_compact = trained.compact_tools if trained is not None else None
    if flag is None:
        return bool(trained_compact), None
    if trained_compact is None or flag == trained_compact:
        return flag, None
    shown, was = ("compact signatures", "JSON schemas") if flag else ("JSON schemas", "compact signatures")
    who = f"adapter {adapter}" if adapter else "the adapter"
    return flag, f"{who} is shown its tools as {shown} but was trained on {was}: it runs on a prompt it was not trained on"
