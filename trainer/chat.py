"""Token sequences of multi-turn episodes, rendered by the model's own chat template.

An episode is trained as ONE sequence: the prompt, then for every turn the tokens the policy generated
(trained on, exactly as sampled) followed by the tokens the env added (tool results, user replies and the
template's scaffolding; masked out). Env tokens are the template's rendering of the conversation after the
assistant turn minus its rendering before it, so any chat template that renders conversations
incrementally works, and nothing the model generated is ever re-tokenised.
"""

from __future__ import annotations

from typing import Any

from env_registry import conversation
from trainer.errors import ChatTemplateError


class ChatFormat:
    """Renders prompts, env continuations and whole reference conversations for one tokenizer."""

    def __init__(self, tokenizer: Any, compact_tools: bool = False) -> None:
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
        self.support = conversation.probe(tokenizer)
        self.compact_tools = compact_tools

    @property
    def renders_tools(self) -> bool:
        return self.support.tools

    @property
    def renders_calls(self) -> bool:
        return self.support.calls

    # --- text -----------------------------------------------------------------------------------
    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, generation_prompt: bool) -> str:
        """The conversation as the model sees it (``env_registry.conversation``: tools and calls written into
        the text where the template cannot render them)."""
        try:
            return conversation.render(self.tokenizer, messages, tools, self.support, generation_prompt, self.compact_tools)
        except Exception as exc:  # jinja errors: the template cannot render this conversation
            raise ChatTemplateError(f"the chat template failed to render the conversation: {exc}") from exc

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode_action(self, generated: list[int]) -> str:
        """What the env receives for a turn: the generated text up to the closing eos."""
        return conversation.reply_text(self.tokenizer, generated, self.eos_id)

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
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, generation_prompt: bool = False
    ) -> tuple[list[int], list[int], int]:
        """A conversation as the policy would have produced it: (ids, mask, prompt length).

        Segments are tokenised exactly as in a rollout (prompt, each assistant turn up to and including
        its eos, the env tokens between), so supervised warm starts, rollouts and evaluation share one
        token layout. With ``generation_prompt`` the env messages after the last assistant turn are added
        as env tokens, ending where the next turn is generated.
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
            if following < len(messages) or (generation_prompt and following > index + 1):
                env = self.continuation_ids(messages[: index + 1], messages[index + 1: following], tools)
                ids += env
                mask += [0] * len(env)
            index = following
        return ids, mask, prompt_len


class EpisodeTokens:
    """One episode's token sequence, grown turn by turn exactly as a rollout grows it: the prompt, then per
    turn the tokens generated (as sampled, never re-tokenised) and the env tokens that follow. Training
    rollouts and evaluation policies both keep their context this way, so a model is evaluated on the
    very tokens it was trained on."""

    def __init__(self, chat: ChatFormat, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> None:
        self.chat = chat
        self.tools = tools
        self.ids: list[int] = chat.prompt_ids(messages, tools)
        self.seen = len(messages)
        self.ended = True

    def generated(self, tokens: list[int], ended: bool) -> None:
        """The policy's turn, as sampled (with its closing eos when it came)."""
        self.ids += tokens
        self.ended = ended

    def observe(self, messages: list[dict[str, Any]]) -> list[int]:
        """The whole conversation so far (its last assistant message is the turn just generated); returns
        the env tokens it adds after that turn, ending with the next generation prompt."""
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
        if last is None:  # the conversation kept none of the policy's turns: start over from it
            self.ids, self.seen, self.ended = self.chat.prompt_ids(messages, self.tools), len(messages), True
            return []
        env = self.chat.continuation_ids(messages[: last + 1], messages[last + 1:], self.tools, ended_with_eos=self.ended)
        self.ids += env
        self.seen = len(messages)
        return env
