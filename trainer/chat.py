"""Token sequences of multi-turn episodes, rendered by the model's own chat template.

An episode is trained as ONE sequence: the prompt, then for every turn the tokens the policy generated
(trained on, exactly as sampled) followed by the tokens the env added (tool results, user replies and the
template's scaffolding; masked out). Env tokens are the template's rendering of the conversation after the
assistant turn minus its rendering before it, so any chat template that renders conversations
incrementally works, and nothing the model generated is ever re-tokenised.
"""

from __future__ import annotations

import json
from typing import Any

from trainer.errors import ChatTemplateError


class ChatFormat:
    """Renders prompts, env continuations and whole reference conversations for one tokenizer."""

    def __init__(self, tokenizer: Any) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ChatTemplateError("the tokenizer has no chat template; train a chat (instruct) model")
        self.tokenizer = tokenizer
        eos = tokenizer.eos_token_id
        if eos is None:
            raise ChatTemplateError("the tokenizer defines no eos token; the policy could never end a turn")
        self.eos_id: int = int(eos)
        self.eos_text: str = tokenizer.convert_ids_to_tokens(self.eos_id)
        pad = tokenizer.pad_token_id
        self.pad_id: int = int(pad if pad is not None else eos)
        self.renders_tools, self.renders_calls = self._probe()

    def _probe(self) -> tuple[bool, bool]:
        """Does the template render tool schemas and assistant tool calls? Many instruct models' templates
        (SmolLM2's, for one) render neither; then both are written into the text in the Hermes format."""
        tool = {"type": "function", "function": {"name": "probe_tool_x", "description": "", "parameters": {"type": "object", "properties": {}}}}
        call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "probe_call_y", "arguments": {}}}]}
        user = [{"role": "user", "content": "hi"}]
        try:
            with_tools = self.tokenizer.apply_chat_template(user, tools=[tool], tokenize=False)
            with_call = self.tokenizer.apply_chat_template(user + [call], tokenize=False)
        except Exception:  # a template that rejects the probe renders neither
            return False, False
        return "probe_tool_x" in with_tools, "probe_call_y" in with_call

    # --- text -----------------------------------------------------------------------------------
    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, generation_prompt: bool) -> str:
        prepared = [_template_message(m, inline_calls=not self.renders_calls) for m in messages]
        if tools and not self.renders_tools:
            prepared = _with_tool_instructions(prepared, tools)
        try:
            return self.tokenizer.apply_chat_template(
                prepared, tools=(tools or None) if self.renders_tools else None, tokenize=False,
                add_generation_prompt=generation_prompt,
            )
        except Exception as exc:  # jinja errors: the template cannot render this conversation
            raise ChatTemplateError(f"the chat template failed to render the conversation: {exc}") from exc

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode_action(self, generated: list[int]) -> str:
        """What the env receives for a turn: the generated text without the closing eos."""
        ids = generated[:-1] if generated and generated[-1] == self.eos_id else generated
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    # --- token sequences ------------------------------------------------------------------------
    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        return self.encode(self.render(messages, tools, generation_prompt=True))

    def continuation_ids(
        self,
        history: list[dict[str, Any]],
        new_messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        ended_with_eos: bool = True,
    ) -> list[int]:
        """Env tokens after an assistant turn: what the template adds between the generated tokens and the
        next generation prompt. ``history`` ends with that assistant message. When the turn was cut at
        max_new_tokens (no eos), the closing eos is part of the env tokens."""
        before = self.render(history, tools, generation_prompt=False)
        after = self.render(history + new_messages, tools, generation_prompt=True)
        if not after.startswith(before):
            raise ChatTemplateError(
                "the chat template does not render conversations incrementally (a later turn changes earlier text); "
                "multi-turn training needs a template whose rendering of a conversation extends that of its prefix"
            )
        cut = before.rfind(self.eos_text)
        if cut < 0:
            raise ChatTemplateError(f"the chat template does not close assistant turns with the eos token {self.eos_text!r}")
        closing = before[cut + len(self.eos_text):]
        text = ("" if ended_with_eos else self.eos_text) + closing + after[len(before):]
        return self.encode(text)

    def conversation_ids(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> tuple[list[int], list[int], int]:
        """A finished conversation as the policy would have produced it: (ids, mask, prompt length).

        Segments are tokenised exactly as in a rollout (prompt, each assistant turn up to and including
        its eos, the env tokens between), so supervised warm starts and rollouts share one token layout.
        """
        first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))
        ids = self.prompt_ids(messages[:first], tools)
        prompt_len = len(ids)
        mask = [0] * prompt_len
        index = first
        while index < len(messages):
            before = self.render(messages[:index], tools, generation_prompt=True)
            after = self.render(messages[: index + 1], tools, generation_prompt=False)
            if not after.startswith(before):
                raise ChatTemplateError("the chat template does not render conversations incrementally")
            turn = after[len(before):]
            cut = turn.rfind(self.eos_text)
            generated = self.encode(turn[:cut] if cut >= 0 else turn) + [self.eos_id]
            ids += generated
            mask += [1] * len(generated)
            following = index + 1
            while following < len(messages) and messages[following].get("role") != "assistant":
                following += 1
            if following < len(messages):
                env = self.continuation_ids(messages[: index + 1], messages[index + 1: following], tools)
                ids += env
                mask += [0] * len(env)
            index = following
        return ids, mask, prompt_len


def _with_tool_instructions(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For templates without tool support: the tools and the Hermes call syntax in the system message."""
    from factory.validation.calibration import TOOL_INSTRUCTIONS

    text = TOOL_INSTRUCTIONS + json.dumps(tools, ensure_ascii=False)
    if messages and messages[0].get("role") == "system":
        return [{**messages[0], "content": (messages[0].get("content") or "") + text}] + messages[1:]
    return [{"role": "system", "content": text.lstrip()}] + messages


def _template_message(message: dict[str, Any], inline_calls: bool = False) -> dict[str, Any]:
    """OpenAI messages as chat templates expect them: tool-call arguments as objects, content never None;
    with ``inline_calls`` (templates that drop tool calls) the calls are written into the content."""
    out = dict(message)
    if out.get("content") is None:
        out["content"] = ""
    calls = [_parsed_arguments(call) for call in out.get("tool_calls") or []]
    if inline_calls and calls:
        del out["tool_calls"]
        parts = [out["content"]] if out["content"] else []
        for call in calls:
            function = call.get("function", {})
            parts.append("<tool_call>" + json.dumps({"name": function.get("name"), "arguments": function.get("arguments")}) + "</tool_call>")
        out["content"] = "\n".join(parts)
    elif calls:
        out["tool_calls"] = calls
    return out


def _parsed_arguments(call: dict[str, Any]) -> dict[str, Any]:
    """The call with its JSON-string arguments as an object (a string that is not JSON is kept as is)."""
    function = dict(call.get("function", {}))
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            function["arguments"] = json.loads(arguments)
        except ValueError:
            pass  # the template prints a string as is
    return {**call, "function": function}
