"""τ²-style task specifications: what the user was told, what a correct agent does, and which version of the
task a run used. The offline labeler reads the instructions; the version decides whether a failure can be
blamed on the agent at all (a task the benchmark corrected since the run is not the agent's fault).

τ² ``tasks.json`` holds ``user_scenario.instructions`` and ``evaluation_criteria`` (``actions`` with
optional ``compare_args``, ``communicate_info``). τ²'s ``Results`` files embed the task objects a run used,
and τ-bench records carry ``info.task`` (``user_id``, ``instruction``, ``actions`` with ``kwargs``,
``outputs``). Importers put a :class:`TaskSpec` on ``Trajectory.metadata["task"]``.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from factory.analyze.errors import AnalyzeInputError
from schemas.errors import one_line
from schemas.trajectory import Trajectory


class GoldAction(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    compare_args: list[str] | None = None


def canonical_sha256(value: Any) -> str:
    """sha256 of canonical JSON (sorted keys, no spaces, UTF-8): the ``task_version`` convention."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class TaskSpec(BaseModel):
    """One task as a run saw it. ``criteria`` fingerprints what the run was graded on (gold actions and
    required communications); ``scenario`` fingerprints what the simulated user was told."""

    id: str
    domain: str | None = None
    instructions: dict[str, Any] = Field(default_factory=dict)
    gold_actions: list[GoldAction] | None = None
    communicate_info: list[str] = Field(default_factory=list)
    user_id: str | None = None
    criteria: str = ""
    scenario: str = ""
    version: str | None = Field(default=None, description="sha256 of the whole task object, when known")
    origin: str = Field(default="", description="file the task came from")
    partial: bool = Field(default=False, description="only the gold actions are known (rollout JSONL carries no more)")

    def text(self) -> str:
        """The user's instructions as one string (for matching and for the labeler's reading)."""
        parts = [str(v) for k, v in sorted(self.instructions.items()) if isinstance(v, str) and k != "domain"]
        return "\n".join(parts)


def _criteria_fp(gold: list[GoldAction] | None, communicate: list[str]) -> str:
    """What grading depends on: the gold writes' names and arguments (they fix the final database) and the
    facts the agent must communicate. ``compare_args`` only steers τ²'s per-action report, not the reward."""
    actions = None if gold is None else [[a.name, a.arguments] for a in gold]
    return canonical_sha256({"actions": actions, "communicate_info": sorted(communicate)})


def _scenario_fp(instructions: dict[str, Any], persona: Any) -> str:
    """What the simulated user was told; empty fields dropped so that newer τ² versions' added nulls match."""
    told = {k: v for k, v in instructions.items() if v not in (None, "", [], {})}
    if persona:
        told["persona"] = persona
    return canonical_sha256(told)


def gold_from_task(task: dict[str, Any]) -> list[GoldAction] | None:
    """Gold actions of one τ² task object, or None when it defines none (``evaluation_criteria`` null)."""
    criteria = task.get("evaluation_criteria")
    if not isinstance(criteria, dict) or criteria.get("actions") is None:
        return None
    out = []
    for action in criteria["actions"]:
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


def spec_from_tau2(task: dict[str, Any], origin: str = "", domain: str | None = None) -> TaskSpec:
    """A τ² task object as a spec; raises KeyError/TypeError/ValidationError on a malformed one."""
    gold = gold_from_task(task)
    criteria = task.get("evaluation_criteria") if isinstance(task.get("evaluation_criteria"), dict) else {}
    communicate = [str(c) for c in (criteria.get("communicate_info") or [])]
    scenario = task.get("user_scenario") if isinstance(task.get("user_scenario"), dict) else {}
    instructions = scenario.get("instructions")
    if isinstance(instructions, str):
        instructions = {"task_instructions": instructions}
    instructions = dict(instructions or {})
    return TaskSpec(
        id=str(task["id"]),
        domain=task_domain(task) or domain,
        instructions=instructions,
        gold_actions=gold,
        communicate_info=communicate,
        user_id=_user_id_in(instructions),
        criteria=_criteria_fp(gold, communicate),
        scenario=_scenario_fp(instructions, scenario.get("persona")),
        version=canonical_sha256(task),
        origin=origin,
    )


def spec_from_tau_bench(task: dict[str, Any], task_id: str, domain: str | None, origin: str = "") -> TaskSpec:
    """A τ-bench ``info.task`` as a spec. τ-bench ids are list indices, not τ² ids: never look them up."""
    gold = [
        GoldAction(name=a["name"], arguments=a.get("kwargs") or a.get("arguments") or {})
        for a in task.get("actions") or []
        if isinstance(a, dict) and isinstance(a.get("name"), str) and a["name"] != "respond"
    ]
    outputs = [str(o) for o in task.get("outputs") or []]
    instruction = str(task.get("instruction") or "")
    return TaskSpec(
        id=task_id,
        domain=domain,
        instructions={"instruction": instruction},
        gold_actions=gold,
        communicate_info=outputs,
        user_id=task.get("user_id") if isinstance(task.get("user_id"), str) else None,
        criteria=_criteria_fp(gold, outputs),
        scenario=_scenario_fp({"instruction": instruction}, None),
        version=None,
        origin=origin,
    )


def _user_id_in(instructions: dict[str, Any]) -> str | None:
    text = " ".join(str(v) for v in instructions.values() if isinstance(v, str))
    match = re.search(r"user id is:?\s*([a-z]+_[a-z]+_\d+)", text, re.IGNORECASE)
    return match.group(1) if match else None


def trajectory_domain(trajectory: Trajectory) -> str | None:
    domain = trajectory.metadata.get("domain")
    if isinstance(domain, str) and domain:
        return domain
    for prefix in ("tau2-", "tau-bench-"):
        if trajectory.target.startswith(prefix):
            return trajectory.target[len(prefix) :]
    return None


def embedded_task(trajectory: Trajectory) -> TaskSpec | None:
    """The task the importer found next to the trajectory (the version the run used), if any."""
    raw = trajectory.metadata.get("task")
    if isinstance(raw, dict):
        try:
            return TaskSpec.model_validate(raw)
        except ValidationError:
            return None
    gold = trajectory.metadata.get("gold_actions")  # older JSONL written before TaskSpec existed
    if isinstance(gold, list):
        try:
            actions = [GoldAction.model_validate(a) for a in gold]
        except ValidationError:
            return None
        version = trajectory.metadata.get("task_version")
        return TaskSpec(id=trajectory.task_id, domain=trajectory_domain(trajectory), gold_actions=actions, criteria=_criteria_fp(actions, []),
                        version=version if isinstance(version, str) else None, partial=True)  # fmt: skip
    return None


class TaskIndex:
    """Tasks from ``--tasks`` files by (domain, id): τ² ids repeat across domains (airline "0", retail "0")."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str | None, str], TaskSpec] = {}
        self._by_id: dict[str, list[TaskSpec]] = {}
        self.files: list[str] = []

    def add(self, spec: TaskSpec) -> None:
        self._by_key[(spec.domain, spec.id)] = spec
        self._by_id.setdefault(spec.id, []).append(spec)

    def __len__(self) -> int:
        return len(self._by_key)

    def specs(self, domain: str | None = None) -> list[TaskSpec]:
        return [s for (d, _), s in self._by_key.items() if domain is None or d in (domain, None)]

    def lookup(self, domain: str | None, task_id: str) -> TaskSpec | None:
        """Exact (domain, id); a task file without a domain matches any; an unknown domain needs a unique id."""
        for key in ((domain, task_id), (None, task_id)):
            if key in self._by_key:
                return self._by_key[key]
        if domain is None:
            candidates = self._by_id.get(task_id, [])
            return candidates[0] if len(candidates) == 1 else None
        return None


def load_tasks(paths: list[Path]) -> TaskIndex:
    """Read τ² ``tasks.json`` files (a list of Task objects, or ``{"tasks": [...]}``)."""
    index = TaskIndex()
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
        except OSError as exc:
            raise AnalyzeInputError(f"{path}: cannot read ({exc.strerror})") from None
        if isinstance(raw, dict) and isinstance(raw.get("tasks"), list):
            raw = raw["tasks"]
        if not isinstance(raw, list):
            raise AnalyzeInputError(f"{path}: expected a JSON list of τ² tasks, got {type(raw).__name__}")
        for number, task in enumerate(raw):
            if not isinstance(task, dict) or "id" not in task:
                raise AnalyzeInputError(f"{path}: task #{number}: field id: missing (not a τ² task object)")
            try:
                index.add(spec_from_tau2(task, origin=str(path)))
            except (KeyError, TypeError, AttributeError, ValidationError) as exc:
                raise AnalyzeInputError(f"{path}: task {task['id']!r}: field evaluation_criteria.actions: malformed ({one_line(exc)})") from None
        index.files.append(str(path))
    return index
