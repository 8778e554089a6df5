"""Routing accuracy against ``factory analyze``: does each failed task reach an adapter for a capability
the analysis found lacking in it?

Ground truth per failed trajectory is the set of menu capabilities labeled LACKING in more than half of
the labeling runs (the same majority rule analyze uses for overlap). A decision is correct when it picks
one of them. Failures with no lacking menu capability are skipped (the default: nothing says which adapter
would help) or, with ``unlabeled="base"``, expected to go to the base model.

Confusion matrix: rows are the expected option, columns the chosen one. When a task has several expected
capabilities its row is the chosen one if the choice is among them, else the one labeled LACKING in most
runs (ties in menu order).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from schemas.label_matrix import LACKING_CODE, LabelMatrix
from router.decide import Router
from router.errors import RouterError
from router.schema import NO_ADAPTER, RouterConfig
from schemas.capability import TrajectoryLabel
from schemas.errors import validation_message
from schemas.jsonl import jsonl_lines
from schemas.trajectory import Trajectory

Unlabeled = Literal["skip", "base"]


class EvalItem(BaseModel):
    trajectory_id: str
    task_id: str
    expected: list[str]
    choice: str = Field(description="the chosen option key (a capability or '(base)')")
    correct: bool
    probability: float = Field(description="probability of the chosen option")


class OptionFigures(BaseModel):
    option: str
    label: str
    support: int = Field(description="tasks whose confusion row is this option")
    chosen: int = Field(description="tasks routed to this option")
    recall: float | None
    precision: float | None


class ConfusionMatrix(BaseModel):
    keys: list[str]
    labels: list[str]
    counts: list[list[int]] = Field(description="counts[expected][chosen]")


class RoutingEvalReport(BaseModel):
    labels_file: str
    capabilities: list[str]
    config: RouterConfig
    n_trajectories: int
    n_failures: int
    n_unlabeled: int = Field(description="failures with no lacking menu capability")
    unlabeled: Unlabeled
    n_evaluated: int
    correct: int
    accuracy: float | None
    majority_baseline: float | None = Field(description="accuracy of always choosing the most often expected option")
    options: list[OptionFigures]
    confusion: ConfusionMatrix
    items: list[EvalItem]
    seconds: float
    mean_decision_seconds: float | None


def read_labels(path: Path) -> tuple[Path, list[list[TrajectoryLabel]]]:
    """``labels.jsonl`` (or the analyze output folder holding it) as one label list per run."""
    path = Path(path)
    if path.is_dir():
        path = path / "labels.jsonl"
    try:
        lines = jsonl_lines(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RouterError(f"--eval {path}: no such file; pass labels.jsonl or the folder `factory analyze --out` wrote") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RouterError(f"--eval {path}: cannot read it ({exc})") from None
    runs: dict[int, list[TrajectoryLabel]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            run = int(record.pop("run", 0)) if isinstance(record, dict) else 0
            label = TrajectoryLabel.model_validate(record)
        except (ValueError, TypeError, ValidationError) as exc:
            detail = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
            raise RouterError(f"--eval {path}: line {number} is not a label from `factory analyze` ({detail[:200]})") from None
        runs.setdefault(run, []).append(label)
    if not runs:
        raise RouterError(f"--eval {path}: no labels in it")
    return path, [runs[r] for r in sorted(runs)]


def expected_sets(
    trajectories: list[Trajectory], runs: list[list[TrajectoryLabel]], capabilities: list[str]
) -> dict[str, list[tuple[str, int]]]:
    """Per failed trajectory: (capability, runs labeling it LACKING) for majority-lacking menu capabilities,
    most often lacking first (ties in menu order)."""
    outcomes = {t.id: t.success for t in trajectories}
    matrix = LabelMatrix.build(outcomes, capabilities, runs)
    counts = (matrix.codes == LACKING_CODE).sum(axis=0)  # (capabilities, trajectories)
    out: dict[str, list[tuple[str, int]]] = {}
    for t, tid in enumerate(matrix.trajectory_ids):
        if matrix.success[t]:
            continue
        lacking = [(c, int(counts[i, t])) for i, c in enumerate(capabilities) if counts[i, t] * 2 > matrix.n_runs]
        out[tid] = sorted(lacking, key=lambda item: -item[1])
    return out


def evaluate_routing(
    router: Router,
    trajectories: list[Trajectory],
    runs: list[list[TrajectoryLabel]],
    labels_file: str = "labels.jsonl",
    unlabeled: Unlabeled = "skip",
    progress: Callable[[int, int], None] | None = None,
) -> RoutingEvalReport:
    """Route every failed trajectory's first observation and score the choices against the labels."""
    started = time.perf_counter()
    capabilities = router.menu.capabilities
    keys, labels = router.menu.keys, router.labels
    by_id = {t.id: t for t in trajectories}
    known = {label.trajectory_id for run in runs for label in run}
    if not known & set(by_id):
        raise RouterError(
            f"none of the {len(by_id)} trajectories has labels in {labels_file}; pass the trajectory files the analysis read"
        )
    expected = expected_sets([t for t in trajectories if t.id in known], runs, capabilities)
    n_unlabeled = sum(1 for v in expected.values() if not v)
    todo = [(tid, [c for c, _ in v] or [NO_ADAPTER]) for tid, v in expected.items() if v or unlabeled == "base"]
    decisions = router.route_many([(tid, by_id[tid]) for tid, _ in todo], progress=progress)
    index = {k: i for i, k in enumerate(keys)}
    counts = [[0] * len(keys) for _ in keys]
    items: list[EvalItem] = []
    for (tid, wanted), decision in zip(todo, decisions):
        chosen = decision.choice or NO_ADAPTER
        correct = chosen in wanted
        row = chosen if correct else wanted[0]
        counts[index[row]][index[chosen]] += 1
        items.append(
            EvalItem(
                trajectory_id=tid, task_id=by_id[tid].task_id, expected=wanted, choice=chosen, correct=correct,
                probability=decision.probabilities[chosen],
            )
        )  # fmt: skip
    n = len(items)
    correct_total = sum(i.correct for i in items)
    options = []
    for k, key in enumerate(keys):
        support, chosen = sum(counts[k]), sum(row[k] for row in counts)
        options.append(
            OptionFigures(
                option=key, label=labels[k], support=support, chosen=chosen,
                recall=counts[k][k] / support if support else None, precision=counts[k][k] / chosen if chosen else None,
            )
        )  # fmt: skip
    baseline = max((sum(key in i.expected for i in items) for key in keys), default=0) / n if n else None
    timed = [d.seconds for d in decisions if d.seconds > 0]
    return RoutingEvalReport(
        labels_file=str(labels_file),
        capabilities=capabilities,
        config=router.config,
        n_trajectories=len(trajectories),
        n_failures=len(expected),
        n_unlabeled=n_unlabeled,
        unlabeled=unlabeled,
        n_evaluated=n,
        correct=correct_total,
        accuracy=correct_total / n if n else None,
        majority_baseline=baseline,
        options=options,
        confusion=ConfusionMatrix(keys=keys, labels=labels, counts=counts),
        items=items,
        seconds=round(time.perf_counter() - started, 3),
        mean_decision_seconds=round(sum(timed) / len(timed), 6) if timed else None,
    )
