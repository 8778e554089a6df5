"""The small interface every target backend implements: tools, an isolated state per episode, tool calls,
and the database hash τ² grades on. One module per backend: ``mcp`` (any MCP server), ``tau2_native``
(τ²-bench itself, when importable).

A backend hosts one episode at a time (a runner owns one backend), so its episode state needs no lock;
episodes in parallel use separate backends. Failures of the target raise
:class:`~env_registry.targets.errors.TargetInfraError` subclasses, never anything else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from env_registry.targets.tasks import Action


@dataclass
class ToolOutcome:
    """What the agent sees of one tool call: the target's text, and whether the target called it an error."""

    content: str
    error: bool = False


@dataclass
class Replay:
    """The end state of replaying a task's gold actions on a fresh state: its hash, and the actions that erred."""

    hash: str | None
    errors: list[dict[str, Any]] = field(default_factory=list)
    unreadable: str | None = None


class TargetBackend(ABC):
    """A live target. ``describe()`` names it in results (server command and version, or package version)."""

    name: str = "abstract"

    @abstractmethod
    def describe(self) -> str:
        """Who answers the tool calls, precisely enough to cache gold hashes by (e.g. the server's name and version)."""

    @abstractmethod
    def tools(self) -> list[dict[str, Any]]:
        """OpenAI-format schemas of the tools the agent may call (bookkeeping tools and parameters hidden)."""

    @property
    def hidden_arguments(self) -> frozenset[str]:
        """Arguments the backend sets itself (e.g. an MCP ``state_key``); an agent that passes one is refused."""
        return frozenset()

    def policy(self) -> str | None:
        """The target's own policy text, when the backend carries one."""
        return None

    @abstractmethod
    def reset(self) -> None:
        """Start a fresh, private state for a new episode."""

    @abstractmethod
    def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run one tool call of the agent against the episode's state."""

    @abstractmethod
    def state_hash(self) -> str | None:
        """τ²'s database hash of the episode's current state; None when this backend cannot read its state."""

    @abstractmethod
    def replay(self, actions: list[Action]) -> Replay:
        """Replay actions on a separate fresh state (the episode's state is left alone) and hash the result."""

    def close(self) -> None:
        """Release processes and files; safe to call twice."""
