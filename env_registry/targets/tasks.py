"""τ²-style tasks: what the simulated user wants, and how τ²-bench grades the episode.

The task file format is τ²-bench's ``tasks.json`` (a JSON list of Task objects, or ``{"tasks": [...]}``),
so the real task files load as they are, and so does any task file written for another MCP server.
Unknown fields are kept (τ² adds fields between releases); ``Task.version`` is the sha256 of the task
object's canonical JSON, recorded with every trajectory so a result always names the task it graded.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path
from schemas.errors import validation_message
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from env_registry.targets.errors import TargetConfigError

DEFAULT_REWARD_BASIS = ["DB", "COMMUNICATE"]
"""What τ²-bench grades when a task names no ``reward_basis`` (the original τ-bench rule)."""


class Action(BaseModel):
    """One gold tool call. ``compare_args`` limits which arguments an ACTION check compares."""

    model_config = ConfigDict(extra="allow")

    action_id: str | None = None
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    requestor: str = "assistant"
    compare_args: list[str] | None = None

    def matches(self, name: str, arguments: dict[str, Any]) -> bool:
        """τ²'s rule: same tool, and equal values on ``compare_args`` (all of the call's arguments when unset)."""
        if name != self.name:
            return False
        keys = list(arguments) if self.compare_args is None else self.compare_args
        if not keys:
            return True
        return {k: v for k, v in arguments.items() if k in keys} == {k: v for k, v in self.arguments.items() if k in keys}


class EvaluationCriteria(BaseModel):
    model_config = ConfigDict(extra="allow")

    actions: list[Action] | None = None
    communicate_info: list[str] | None = None
    nl_assertions: list[str] | None = None
    env_assertions: list[Any] | None = None
    reward_basis: list[str] = Field(default_factory=lambda: list(DEFAULT_REWARD_BASIS))


class UserInstructions(BaseModel):
    model_config = ConfigDict(extra="allow")

    domain: str | None = None
    reason_for_call: str = ""
    known_info: str | None = None
    unknown_info: str | None = None
    task_instructions: str = ""


class UserScenario(BaseModel):
    model_config = ConfigDict(extra="allow")

    persona: str | None = None
    instructions: UserInstructions | str

    def text(self) -> str:
        """The scenario as the simulated user reads it: persona, then the situation, field by field."""
        lines = []
        if self.persona:
            lines += ["Persona:", textwrap.indent(self.persona, "  ")]
        instructions = self.instructions
        if isinstance(instructions, str):
            lines += ["Situation:", textwrap.indent(instructions, "  ")]
            return "\n".join(lines)
        for title, value in (
            ("Why you are calling", instructions.reason_for_call),
            ("What you know", instructions.known_info),
            ("What you do not know", instructions.unknown_info),
            ("How to behave", instructions.task_instructions),
        ):
            if value:
                lines += [f"{title}:", textwrap.indent(value, "  ")]
        return "\n".join(lines)


class Task(BaseModel):
    """One τ² task. ``initial_state`` (a τ² state patch) is kept but only native backends can apply it."""

    model_config = ConfigDict(extra="allow")

    id: str
    description: Any = None
    user_scenario: UserScenario
    initial_state: Any = None
    evaluation_criteria: EvaluationCriteria | None = None
    _version: str = PrivateAttr(default="")

    @property
    def version(self) -> str:
        return self._version

    @property
    def gold_actions(self) -> list[Action]:
        criteria = self.evaluation_criteria
        return [a for a in (criteria.actions or []) if a.requestor == "assistant"] if criteria else []

    @property
    def reward_basis(self) -> list[str]:
        return list(self.evaluation_criteria.reward_basis) if self.evaluation_criteria else []

    @property
    def domain(self) -> str | None:
        instructions = self.user_scenario.instructions
        return instructions.domain if isinstance(instructions, UserInstructions) else None


def task_version(raw: Any) -> str:
    """sha256 of a task object's canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_tasks(raw: Any, source: str) -> list[Task]:
    """Validate a decoded task file; errors name the source, the task and the field."""
    if isinstance(raw, dict) and isinstance(raw.get("tasks"), list):
        raw = raw["tasks"]
    if not isinstance(raw, list):
        raise TargetConfigError(f"{source}: expected a JSON list of τ² tasks, got {type(raw).__name__}")
    tasks: list[Task] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        if isinstance(item, dict) and isinstance(item.get("id"), int):
            item = {**item, "id": str(item["id"])}
        try:
            task = Task.model_validate(item)
        except ValidationError as exc:
            name = item.get("id", f"#{index}") if isinstance(item, dict) else f"#{index}"
            raise TargetConfigError(f"{source}: task {name}: {validation_message(exc)}") from None
        if task.id in seen:
            raise TargetConfigError(f"{source}: task id {task.id!r} appears twice; task ids must be unique")
        seen.add(task.id)
        task._version = task_version(item)
        tasks.append(task)
    if not tasks:
        raise TargetConfigError(f"{source}: the file holds no tasks")
    return tasks


def load_tasks(path: str | Path) -> list[Task]:
    """Read a τ² ``tasks.json``; one clear error per kind of bad file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TargetConfigError(f"{path}: no such task file") from None
    except IsADirectoryError:
        raise TargetConfigError(f"{path}: is a directory, expected a τ² tasks.json file") from None
    except UnicodeDecodeError:
        raise TargetConfigError(f"{path}: not a UTF-8 text file") from None
    except OSError as exc:
        raise TargetConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TargetConfigError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    return parse_tasks(raw, str(path))


def select_tasks(tasks: list[Task], task_ids: list[str] | None) -> list[Task]:
    """The tasks with these ids, in the order given; an unknown id names a few known ones."""
    if not task_ids:
        return list(tasks)
    by_id = {task.id: task for task in tasks}
    missing = [tid for tid in task_ids if tid not in by_id]
    if missing:
        known = ", ".join(list(by_id)[:8]) + (", ..." if len(by_id) > 8 else "")
        raise TargetConfigError(f"unknown task id(s) {', '.join(map(repr, missing))}; known ids: {known}")
    return [by_id[tid] for tid in dict.fromkeys(task_ids)]
