"""The routing prompt, as token ids: a menu of labeled capabilities with demos, then the task, then the
assistant turn whose first token is the label.

Layout (rendered with the base model's own chat template)::

    system:    instruction; per option "<label>: <capability>\\n<description>\\nExample:\\n<demo>";
               "<label>: no skill\\n<none description>"; which labels to answer with
    user:      "Task:\\n<first observation>\\n\\nWhich label fits this task best? ..."
    assistant: <- the next token is read here

The menu comes first so its key/value cache can be computed once per label order and reused for every
task (``prefix_len``). Every piece of outside text (capability names, descriptions, demos, the task) is
tokenized with ``split_special_tokens``: a demo rendered through the chat template, or a hostile task,
shows its ``<|im_start|>`` markers as plain text and can never open a turn of the routing prompt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from env_registry import conversation
from router.errors import RouterError
from router.labels import label_token_ids, labels_for
from router.observation import clip, template_messages
from router.schema import NO_ADAPTER, DemoTrajectory, RouterConfig, RoutingMenu
from schemas.messages import Message

_SLOT = "\u27e6route-slot-{}\u27e7"
_SLOT_RE = re.compile("\u27e6route-slot-(\\d+)\u27e7")


@dataclass(frozen=True)
class RoutingPrompt:
    """Token ids of one routing prompt; the first ``prefix_len`` depend only on the label order."""

    ids: list[int]
    prefix_len: int
    keys: list[str]
    labels: list[str]


def _plain(messages: list[dict[str, Any]]) -> str:
    """A template-free rendering, used only when a chat template refuses a transcript."""
    parts = []
    for m in messages:
        calls = "".join(f"\n[call {c['function']['name']}] {c['function']['arguments']}" for c in m.get("tool_calls", []))
        parts.append(f"[{m['role']}] {m.get('content') or ''}{calls}")
    return "\n".join(parts)


def render_chat(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
    support: conversation.TemplateSupport | None = None,
) -> str:
    """A transcript as the model saw it in training (``env_registry.conversation``), without a generation
    prompt; a template that refuses the transcript gets a template-free rendering."""
    try:
        return conversation.render(tokenizer, messages, tools, support or conversation.probe(tokenizer), generation_prompt=False)
    except Exception:  # noqa: BLE001 - templates raise anything (jinja errors, role-order checks)
        return _plain(messages)


class PromptBuilder:
    """Builds routing prompts for one menu, tokenizer and config; demos are rendered once."""

    def __init__(self, tokenizer: Any, menu: RoutingMenu, config: RouterConfig) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise RouterError("the base model's tokenizer has no chat template; the routing prompt needs one")
        self.tokenizer = tokenizer
        self.menu = menu
        self.config = config
        self.labels = labels_for(config.alphabet, len(menu.keys))
        self.support = conversation.probe(tokenizer)
        self.demos = {o.capability: self._demo(o.demo) for o in menu.options}
        self._prefixes: dict[tuple[str, ...], list[int]] = {}
        probe = self._chunks(menu.keys, "task")
        self.label_ids = label_token_ids(tokenizer, self.labels, context=probe[-1][0])
        self.token_of = dict(zip(self.labels, self.label_ids))

    # -- rendering ------------------------------------------------------------------------------
    def _demo(self, demo: DemoTrajectory) -> str:
        messages = template_messages(demo.messages, include_system=self.config.include_system)
        tools = demo.tools if self.config.include_tools else None
        return clip(render_chat(self.tokenizer, messages, tools, self.support).strip(), self.config.max_demo_chars)

    def observation_text(self, messages: Sequence[Message]) -> str:
        text = render_chat(self.tokenizer, template_messages(messages, include_system=self.config.include_system), None, self.support)
        return clip(text.strip(), self.config.max_observation_chars)

    def _chunks(self, order: Sequence[str], observation: str) -> list[tuple[str, bool]]:
        """The prompt as (text, is_outside_text) pieces, in order."""
        labels = self.labels
        slots: list[str] = []

        def slot(text: str) -> str:
            slots.append(text)
            return _SLOT.format(len(slots) - 1)

        system = [self.config.instruction, "\n\n"]
        for label, key in zip(labels, order):
            if key == NO_ADAPTER:
                system.append(f"{label}: no skill\n{self.config.none_description}\n\n")
            else:
                option = self.menu.option(key)
                system.append(f"{label}: {slot(key)}\n{slot(option.description)}\nExample:\n{slot(self.demos[key])}\n\n")
        system.append(f"Answer with one label only: {', '.join(labels)}.")
        user = f"Task:\n{slot(observation)}\n\nWhich label fits this task best? Answer with the label only."
        rendered = self._template([{"role": "system", "content": "".join(system)}, {"role": "user", "content": user}])
        pieces: list[tuple[str, bool]] = []
        cursor, seen = 0, []
        for match in _SLOT_RE.finditer(rendered):
            pieces.append((rendered[cursor : match.start()], False))
            index = int(match.group(1))
            seen.append(index)
            pieces.append((slots[index], True))
            cursor = match.end()
        pieces.append((rendered[cursor:], False))
        if seen != list(range(len(slots))):
            raise RouterError("the base model's chat template altered the routing prompt's text; it cannot be used to route")
        return pieces

    def _template(self, messages: list[dict[str, Any]]) -> str:
        kwargs = {"tokenize": False, "add_generation_prompt": True, "enable_thinking": False}
        try:
            return str(self.tokenizer.apply_chat_template(messages, **kwargs))
        except Exception:  # noqa: BLE001 - a template without a system role: fold it into the user turn
            merged = [{"role": "user", "content": messages[0]["content"] + "\n\n" + messages[1]["content"]}]
            return str(self.tokenizer.apply_chat_template(merged, **kwargs))

    # -- tokens ---------------------------------------------------------------------------------
    def _encode(self, text: str, outside: bool) -> list[int]:
        if not text:
            return []
        return list(self.tokenizer(text, add_special_tokens=False, split_special_tokens=outside)["input_ids"])

    def build(self, order: Sequence[str], observation: Sequence[Message]) -> RoutingPrompt:
        """The prompt for one label order; ``order`` lists option keys (capabilities and NO_ADAPTER)."""
        if sorted(order) != sorted(self.menu.keys):
            raise RouterError(f"a label order must list every menu option once, got {list(order)}")
        pieces = self._chunks(order, self.observation_text(observation))
        task_slot = len(pieces) - 2  # the observation is the last outside piece
        key = tuple(order)
        prefix = self._prefixes.get(key)
        if prefix is None:
            prefix = [t for text, outside in pieces[:task_slot] for t in self._encode(text, outside)]
            self._prefixes[key] = prefix
        suffix = [t for text, outside in pieces[task_slot:] for t in self._encode(text, outside)]
        return RoutingPrompt(ids=prefix + suffix, prefix_len=len(prefix), keys=list(order), labels=list(self.labels))
