"""Simulated users of ToolSandbox scenarios: ToolSandbox's own user simulator on a configured LLM, or a
deterministic scripted user when none is configured.

A ToolSandbox user replies to the agent's message or ends the conversation with its ``end_conversation``
tool. The LLM user reads exactly what ToolSandbox's simulator reads (the scenario's user instructions, its
few-shot turns, the dialogue, and the ``end_conversation`` schema, all from the worker) through any
``llm_clients`` client; the tool is offered in the Hermes text protocol, as to LLM policies. The scripted
user answers a question of the agent with its task (at most twice) and otherwise ends the conversation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from trace_env.actions import parse_action

from env_registry.targets.errors import TargetError
from env_registry.targets.users import UserSimulatorError

END_TOOL = "end_conversation"
OPENING = "Hi! What would you like me to do?"
PROTOCOL = """# Tools
You can call these functions. To call one, write a block like
<tool_call>{{"name": "<function name>", "arguments": {{}}}}</tool_call>
<tools>
{tools}
</tools>"""


@dataclass
class UserMove:
    """The user's turn: a message to the agent, or the end of the conversation."""

    text: str = ""
    end: bool = False


class SandboxUser:
    name = "abstract"

    def move(self, agent_text: str, view: Callable[[], dict[str, Any]]) -> UserMove:
        """``agent_text``: the agent's last message; ``view()`` fetches what ToolSandbox's simulator would read."""
        raise NotImplementedError


class ScriptedSandboxUser(SandboxUser):
    """Deterministic: answers a question with the scenario's task, at most ``max_answers`` times, else ends."""

    name = "scripted"

    def __init__(self, task_text: str, max_answers: int = 2) -> None:
        self.task_text = task_text.strip() or "Please do what I asked."
        self.max_answers = max_answers
        self.answers = 0

    def move(self, agent_text: str, view: Callable[[], dict[str, Any]]) -> UserMove:
        if "?" in (agent_text or "") and self.answers < self.max_answers:
            self.answers += 1
            return UserMove(self.task_text)
        return UserMove(end=True)


class LLMSandboxUser(SandboxUser):
    """ToolSandbox's user simulator (its prompt, few-shot turns and end tool) played by a ``llm_clients`` client."""

    name = "llm"

    def __init__(self, client: Any, temperature: float | None = 0.0, max_tokens: int = 512) -> None:
        self.client = client
        self.temperature = temperature
        self.max_tokens = max_tokens

    def move(self, agent_text: str, view: Callable[[], dict[str, Any]]) -> UserMove:
        from llm_clients import LLMError

        seen = view()
        system, dialogue = user_prompt(seen.get("messages") or [], seen.get("tools") or [])
        try:
            response = self.client.complete(dialogue, system=system, max_tokens=self.max_tokens, temperature=self.temperature)
        except LLMError as exc:
            raise UserSimulatorError(f"simulated user ({self.client.describe()}) failed: {exc}") from None
        parsed = parse_action(response.text)
        if any(call.name == END_TOOL for call in parsed.calls):
            return UserMove(end=True)
        text = (parsed.content or "").strip()
        if not text:
            raise UserSimulatorError(f"simulated user ({self.client.describe()}) returned an empty message")
        return UserMove(text)


def user_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[str, list[dict[str, str]]]:
    """ToolSandbox's user-side messages as one system prompt (instructions plus the tool protocol) and a
    dialogue that starts with 'user' and alternates, as every chat API requires."""
    system = "\n\n".join(m.get("content") or "" for m in messages if m.get("role") == "system")
    system += "\n\n" + PROTOCOL.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
    dialogue: list[dict[str, str]] = []
    for message in messages:
        role, content = message.get("role"), (message.get("content") or "").strip()
        if role not in ("user", "assistant") or not content:
            continue
        if not dialogue and role == "assistant":
            dialogue.append({"role": "user", "content": OPENING})
        if dialogue and dialogue[-1]["role"] == role:
            dialogue[-1]["content"] += "\n\n" + content
        else:
            dialogue.append({"role": str(role), "content": content})
    return system.strip(), dialogue


def sandbox_user_factory(spec: Any = "scripted", *, temperature: float | None = 0.0) -> Callable[[Any], SandboxUser]:
    """``scripted``, an LLM spec (``openai:gpt-4.1``) or a callable ``task -> SandboxUser``."""
    if callable(spec):
        return spec
    text = str(spec or "scripted").strip()
    if text == "scripted":
        return lambda task: ScriptedSandboxUser(str(task.user_scenario.instructions))
    from llm_clients import LLMConfigError, make_client, parse_llm_spec

    try:
        client = make_client(parse_llm_spec(text.removeprefix("llm:")), cache=False)
    except LLMConfigError as exc:
        raise TargetError(f"user {text!r}: {exc}") from None
    return lambda task: LLMSandboxUser(client, temperature=temperature)
