"""The hand-labelled set's notation: a case is a conversation on a real τ² task, written turn by turn, and
the labels a careful reader gives it, each with the reason.

Tool results are never written by hand: every call is answered by the world kits' faithful tools on a
private copy of the real τ² database (``factory.testing.tau2_replay``), and the outcome is graded for real:
the final database hash against the task's gold hash (``../shared/targets/tau2/*/gold_hashes.json``) and
τ²'s COMMUNICATE check on the task's ``communicate_info``. Natural-language assertions (retail, HEAD tasks)
need an LLM judge and are not judged. Each case states the outcome it expects, so a case whose
conversation does not produce that outcome fails loudly instead of being mislabelled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from env_registry.targets.dbhash import AIRLINE, RETAIL, db_hash
from factory.analyze.tasks import spec_from_tau2
from factory.testing.tau2_replay import Tau2Domain
from schemas.messages import FunctionCall, Message, ToolCall
from schemas.trajectory import Trajectory

SHAPES = {"airline": AIRLINE, "retail": RETAIL}
GREETING = "Hi! How can I help you today?"
TRANSFER_LINE = "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON."
Cause = Literal["agent", "user_simulator", "task_revised", "infrastructure"]


@dataclass
class U:
    """A user (simulator) message."""

    text: str


@dataclass
class A:
    """An assistant text message."""

    text: str


@dataclass
class C:
    """An assistant tool call, answered by the real database (``error`` forces an error result instead)."""

    name: str
    arguments: dict[str, Any]
    error: str | None = None


def call(name: str, **arguments: Any) -> C:
    return C(name, arguments)


@dataclass
class Case:
    """One hand-labelled trajectory.

    ``lacking`` maps each capability a careful reader finds lacking to the reason (the message and the
    values that show it); for an agent-caused failure at least one. ``also`` lists capabilities that would be
    a defensible reading of the same mistake (a label there is not counted wrong). ``cause`` says whose
    fault a failure is; successes have ``cause="agent"`` and normally no lacking capability.
    """

    id: str
    domain: Literal["airline", "retail"]
    task: str
    split: Literal["tune", "holdout"]
    turns: list[U | A | C]
    expect: Literal["success", "failure"]
    cause: Cause = "agent"
    lacking: dict[str, str] = field(default_factory=dict)
    also: dict[str, str] = field(default_factory=dict)
    note: str = ""
    task_file: str = "tasks.json"
    termination: str = "user_stop"
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Built:
    case: Case
    trajectory: Trajectory
    reward: float
    checks: dict[str, bool]


class Domains:
    """The real τ² domains, loaded once: database, tasks (both released versions) and gold hashes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.domains = {name: Tau2Domain.load(root / name) for name in ("airline", "retail")}
        self.gold = {name: json.loads((root / name / "gold_hashes.json").read_text(encoding="utf-8")) for name in self.domains}
        self.tasks: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}

    def task(self, domain: str, file: str, task_id: str) -> dict[str, Any]:
        key = (domain, file)
        if key not in self.tasks:
            raw = json.loads((self.root / domain / file).read_text(encoding="utf-8"))
            self.tasks[key] = {str(t["id"]): t for t in raw}
        return self.tasks[key][task_id]


def build(case: Case, domains: Domains) -> Built:
    """Play the case against a private copy of the database and grade it."""
    domain = domains.domains[case.domain]
    task = domains.task(case.domain, case.task_file, case.task)
    db = domain.scratch()
    messages = [Message(role="assistant", content=GREETING)]
    for number, turn in enumerate(case.turns):
        if isinstance(turn, U):
            messages.append(Message(role="user", content=turn.text))
        elif isinstance(turn, A):
            messages.append(Message(role="assistant", content=turn.text))
        else:
            call_id = f"call_{number}"
            function = FunctionCall(name=turn.name, arguments=json.dumps(turn.arguments, ensure_ascii=False))
            messages.append(Message(role="assistant", content=None, tool_calls=[ToolCall(id=call_id, function=function)]))
            text, error = (turn.error, True) if turn.error else domain.respond(db, turn.name, turn.arguments)
            messages.append(Message(role="tool", content=text, tool_call_id=call_id, name=turn.name, error=error))
    criteria = task.get("evaluation_criteria") or {}
    said = [(m.content or "").lower().replace(",", "") for m in messages if m.role == "assistant"]
    checks = {"db": db_hash(db, SHAPES[case.domain]) == domains.gold[case.domain]["tasks"][case.task_file][case.task]["final_hash"]}
    for info in criteria.get("communicate_info") or []:
        checks[f"communicate:{info}"] = any(str(info).lower() in text for text in said)
    stopped = case.termination in ("user_stop", "agent_stop")
    reward = 1.0 if stopped and all(checks.values()) else 0.0
    spec = spec_from_tau2(task, origin=f"{case.domain}/{case.task_file}", domain=case.domain)
    trajectory = Trajectory(
        id=case.id, target=f"tau2-{case.domain}", task_id=case.task, messages=messages, reward=reward, success=reward == 1.0,
        source="tau2", metadata={"domain": case.domain, "termination_reason": case.termination, "task": spec.model_dump(mode="json"),
                                 "task_version": spec.version, **case.metadata},
    )  # fmt: skip
    return Built(case, trajectory, reward, checks)
