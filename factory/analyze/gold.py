"""Gold actions of τ²-style tasks: what a correct agent does, as used by the offline labeler.

τ² ``tasks.json`` holds ``evaluation_criteria.actions`` for every task (name, arguments, optional
``compare_args``). τ²'s ``Results`` files embed the same task objects, and τ-bench trajectories carry
``info.task.actions`` (``name``/``kwargs``); importers copy those onto ``Trajectory.metadata["gold_actions"]``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from factory.analyze.errors import AnalyzeInputError
from schemas.trajectory import Trajectory


class GoldAction(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    compare_args: list[str] | None = None


def gold_from_task(task: dict[str, Any]) -> list[GoldAction] | None:
    """Gold actions of one τ² task object, or None when it defines none (``evaluation_criteria`` null)."""
    criteria = task.get("evaluation_criteria")
    if not isinstance(criteria, dict):
        return None
    actions = criteria.get("actions")
    if actions is None:
        return None
    out = []
    for action in actions:
        if action.get("requestor", "assistant") != "assistant":
            continue  # user-side actions (telecom) are not the agent's to make
        out.append(GoldAction(name=action["name"], arguments=action.get("arguments") or {}, compare_args=action.get("compare_args")))
    return out


def task_domain(task: dict[str, Any]) -> str | None:
    scenario = task.get("user_scenario") or {}
    instructions = scenario.get("instructions") if isinstance(scenario, dict) else None
    if isinstance(instructions, dict) and isinstance(instructions.get("domain"), str):
        return instructions["domain"]
    return None


class GoldIndex:
    """Gold actions by (domain, task id): τ² task ids repeat across domains (airline "0", retail "0")."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str | None, str], list[GoldAction]] = {}
        self._by_id: dict[str, list[list[GoldAction]]] = {}

    def add(self, domain: str | None, task_id: str, actions: list[GoldAction]) -> None:
        self._by_key[(domain, task_id)] = actions
        self._by_id.setdefault(task_id, []).append(actions)

    def __len__(self) -> int:
        return len(self._by_key)

    def lookup(self, domain: str | None, task_id: str) -> list[GoldAction] | None:
        """Exact (domain, id); a task file without a domain matches any; an unknown domain needs a unique id."""
        for key in ((domain, task_id), (None, task_id)):
            if key in self._by_key:
                return self._by_key[key]
        if domain is None:
            candidates = self._by_id.get(task_id, [])
            return candidates[0] if len(candidates) == 1 else None
        return None

    def for_trajectory(self, trajectory: Trajectory) -> list[GoldAction] | None:
        """``--tasks`` gold first, else the gold the importer found inside the trajectory file."""
        found = self.lookup(trajectory_domain(trajectory), trajectory.task_id)
        if found is not None:
            return found
        embedded = trajectory.metadata.get("gold_actions")
        if isinstance(embedded, list):
            try:
                return [GoldAction.model_validate(a) for a in embedded]
            except ValidationError:
                return None
        return None


def trajectory_domain(trajectory: Trajectory) -> str | None:
    domain = trajectory.metadata.get("domain")
    if isinstance(domain, str) and domain:
        return domain
    for prefix in ("tau2-", "tau-bench-"):
        if trajectory.target.startswith(prefix):
            return trajectory.target[len(prefix) :]
    return None


def load_tasks(paths: list[Path]) -> GoldIndex:
    """Read τ² ``tasks.json`` files (a list of Task objects, or ``{"tasks": [...]}``)."""
    index = GoldIndex()
    for path in paths:
        path = Path(path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise AnalyzeInputError(f"{path}: no such tasks file") from None
        except IsADirectoryError:
            raise AnalyzeInputError(f"{path}: is a directory, expected a τ² tasks.json file") from None
        except json.JSONDecodeError as exc:
            raise AnalyzeInputError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
        except UnicodeDecodeError:
            raise AnalyzeInputError(f"{path}: not a UTF-8 text file") from None
        if isinstance(raw, dict) and isinstance(raw.get("tasks"), list):
            raw = raw["tasks"]
        if not isinstance(raw, list):
            raise AnalyzeInputError(f"{path}: expected a JSON list of τ² tasks, got {type(raw).__name__}")
        for number, task in enumerate(raw):
            if not isinstance(task, dict) or "id" not in task:
                raise AnalyzeInputError(f"{path}: task #{number}: field id: missing (not a τ² task object)")
            try:
                actions = gold_from_task(task)
            except (KeyError, TypeError, ValidationError) as exc:
                raise AnalyzeInputError(
                    f"{path}: task {task['id']!r}: field evaluation_criteria.actions: malformed ({exc})"
                ) from None
            if actions is not None:
                index.add(task_domain(task), str(task["id"]), actions)
    return index
