"""Simulated users of a τ² task: an LLM playing the customer, and a deterministic scripted customer for tests.

Both open the conversation and then answer each agent message; a reply carrying a stop token
(``###STOP###``, ``###TRANSFER###``, ``###OUT-OF-SCOPE###``, τ²'s vocabulary) ends the episode with
``user_stop``. The LLM user's instructions are our own words around the task's user scenario.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from trace_env import sdk

from env_registry.targets.errors import TargetError
from env_registry.targets.tasks import Task, UserInstructions

STOP_TOKENS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
GREETING = "Hi! How can I help you today?"

USER_SYSTEM = """You are role-playing a customer who has contacted a customer-service agent by chat.
You are the customer, never the agent. The agent cannot see these instructions.

How to play the customer:
- Write only the customer's next message: short, natural, one message at a time.
- Pursue the goal in your scenario. Share a piece of information only when the agent needs it, and only
  information your scenario gives you. Never make up names, numbers, ids or other facts; if you are asked
  for something your scenario does not tell you, say you do not know it.
- Behave as the scenario describes (for example, how patient or insistent you are).
- When your request is fully handled, or the agent clearly cannot handle it, end the chat: write
  ###STOP### at the end of your last message. If the agent transfers you to a human agent, write
  ###TRANSFER###. If the conversation goes somewhere your scenario gives you no guidance for, write
  ###OUT-OF-SCOPE###.

Your scenario:
<scenario>
{scenario}
</scenario>"""


class UserSimulatorError(TargetError):
    """The simulated user could not produce a reply (e.g. its LLM failed); not the agent's fault."""


@dataclass
class UserTurn:
    text: str
    done: bool = False


def is_stop(text: str) -> bool:
    return any(token in (text or "") for token in STOP_TOKENS)


class SimulatedUser(ABC):
    """One user for one episode: ``opening()`` once, then ``reply(conversation)`` after each agent message."""

    name = "abstract"

    @abstractmethod
    def opening(self) -> str: ...

    @abstractmethod
    def reply(self, conversation: list[dict[str, Any]]) -> UserTurn:
        """``conversation``: the episode's messages so far (all roles); the user sees only the dialogue."""


class ScriptedTaskUser(SimulatedUser):
    """Deterministic: opens with the reason for the call and what it knows, repeats that when asked,
    confirms when asked to confirm, and ends the chat at the agent's first other message."""

    name = "scripted"

    def __init__(self, task: Task, max_turns: int = 8) -> None:
        instructions = task.user_scenario.instructions
        if isinstance(instructions, UserInstructions):
            self.reason = instructions.reason_for_call.strip()
            self.known = (instructions.known_info or "").strip()
        else:
            self.reason, self.known = str(instructions).strip(), ""
        facts = [(("",), self.known)] if self.known else []  # "" is in every text: any request gets the facts
        self.script = sdk.ScriptedUser(facts=facts, closing="Thank you, that is all. ###STOP###", max_turns=max_turns)

    def opening(self) -> str:
        return f"{self.reason} {self.known}".strip() or "Hello, I need some help."

    def reply(self, conversation: list[dict[str, Any]]) -> UserTurn:
        turns = sum(1 for m in conversation if m.get("role") == "user") - 1
        episode = sdk.Episode(scenario=sdk.Scenario(0, {}, {}, {}), state={}, messages=conversation, user_turns=max(0, turns))
        agent_text = next((m.get("content") or "" for m in reversed(conversation) if m.get("role") == "assistant"), "")
        answer = self.script.reply(episode, agent_text)
        return UserTurn(answer.text, answer.done or is_stop(answer.text))


class LLMUser(SimulatedUser):
    """A customer played by an LLM (any ``llm_clients`` client) from the task's user scenario."""

    name = "llm"

    def __init__(self, task: Task, client: Any, temperature: float | None = 0.0, max_tokens: int = 512) -> None:
        self.client = client
        self.system = USER_SYSTEM.format(scenario=task.user_scenario.text())
        self.temperature = temperature
        self.max_tokens = max_tokens

    def _ask(self, dialogue: list[dict[str, str]]) -> str:
        from llm_clients import LLMError

        try:
            response = self.client.complete(dialogue, system=self.system, max_tokens=self.max_tokens, temperature=self.temperature)
        except LLMError as exc:
            raise UserSimulatorError(f"simulated user ({self.client.describe()}) failed: {exc}") from None
        text = response.text.strip()
        if not text:
            raise UserSimulatorError(f"simulated user ({self.client.describe()}) returned an empty message")
        return text

    def opening(self) -> str:
        return self._ask([{"role": "user", "content": GREETING}])

    def reply(self, conversation: list[dict[str, Any]]) -> UserTurn:
        text = self._ask(flip_roles(conversation))
        return UserTurn(text, is_stop(text))


def flip_roles(conversation: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The dialogue from the customer's side: the agent's words are 'user', the customer's 'assistant'.

    Tool traffic is invisible to a customer; consecutive messages of one side are joined, and the greeting
    comes first, so the roles alternate as every chat API requires.
    """
    dialogue: list[dict[str, str]] = [{"role": "user", "content": GREETING}]
    for message in conversation:
        role = {"assistant": "user", "user": "assistant"}.get(str(message.get("role")))
        content = (message.get("content") or "").strip()
        if role is None or not content:
            continue
        if dialogue[-1]["role"] == role:
            dialogue[-1]["content"] += "\n\n" + content
        else:
            dialogue.append({"role": role, "content": content})
    return dialogue


def user_factory(spec: Any = "scripted", *, temperature: float | None = 0.0) -> Any:
    """``"scripted"``, any LLM spec ``llm_clients`` understands (``openai:gpt-4.1``, ``vllm:MODEL``), or a
    callable ``(task, seed) -> SimulatedUser``. LLM users are built uncached, so trials stay independent."""
    if callable(spec):
        return spec
    text = str(spec or "scripted").strip()
    if text == "scripted":
        return lambda task, seed: ScriptedTaskUser(task)
    from llm_clients import LLMConfigError, make_client, parse_llm_spec

    try:
        client = make_client(parse_llm_spec(text.removeprefix("llm:")), cache=False)
    except LLMConfigError as exc:
        raise TargetError(f"user {text!r}: {exc}") from None
    return lambda task, seed: LLMUser(task, client, temperature=temperature)
