"""The hand-labelled set's notation: a case is a conversation on a real τ² task, written turn by turn, and
the labels a careful reader gives it, each with the reason.

Tool results are never written by hand: every call is answered by the world kits' faithful tools on a
private copy of the real τ² database (``factory.testing.tau2_replay``), and the outcome is graded for real:
the final database against the gold one (the task's gold actions replayed on another copy; the records either
run changed are compared after τ²'s normalisation, which decides exactly what comparing τ²'s DB hashes
decides, and ``full_hash=True`` compares the hashes of ``../shared/targets/tau2/*/gold_hashes.json`` instead,
at 0.4 s a case) and τ²'s COMMUNICATE check on the task's ``communicate_info``. Natural-language assertions (retail, HEAD tasks)
need an LLM judge and are not judged. Each case states the outcome it expects, so a case whose
conversation does not produce that outcome fails loudly instead of being mislabelled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from env_registry.targets.dbhash import AIRLINE, RETAIL, db_hash, normalise
from factory.analyze.tasks import gold_from_task, spec_from_tau2
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


def _changed(domain: Tau2Domain, db: dict[str, Any]) -> dict[str, set[str]]:
    """Keys of the records a run replaced or added (the scratch copy shares every untouched record)."""
    return {table: {k for k, v in records.items() if domain.db[table].get(k) is not v} for table, records in db.items()}


def same_database(domain: Tau2Domain, shape: Any, db: dict[str, Any], gold: dict[str, Any]) -> bool:
    """Whether two scratch copies of one database hold the same data after τ²'s normalisation: only records
    either changed can differ, so only those are compared."""
    ours, theirs = _changed(domain, db), _changed(domain, gold)
    for table in db:
        keys = sorted(ours.get(table, set()) | theirs.get(table, set()))
        a = normalise({table: {k: db[table].get(k) for k in keys}}, shape)
        b = normalise({table: {k: gold[table].get(k) for k in keys}}, shape)
        if json.dumps(a, sort_keys=True, default=str) != json.dumps(b, sort_keys=True, default=str):
            return False
    return True


def build(case: Case, domains: Domains, full_hash: bool = False) -> Built:
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
    if full_hash:
        checks = {"db": db_hash(db, SHAPES[case.domain]) == domains.gold[case.domain]["tasks"][case.task_file][case.task]["final_hash"]}
    else:
        gold = domain.scratch()
        for action in gold_from_task(task) or []:
            domain.respond(gold, action.name, action.arguments)
        checks = {"db": same_database(domain, SHAPES[case.domain], db, gold)}
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
