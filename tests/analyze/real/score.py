"""Runs ``factory analyze``'s offline labeler on the stored real τ² trajectories and scores it against
``labels.jsonl`` (see ``factory.analyze.agreement``)."""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from factory.analyze.agreement import Agreement, HandLabel, agreement, load_hand_labels
from factory.analyze.importers import load_trajectories
from factory.analyze.pipeline import AnalysisResult, AnalyzeConfig, analyze
from factory.analyze.tasks import TaskIndex, load_tasks
from schemas.trajectory import Trajectory

HERE = Path(__file__).parent
DATA, LABELS, SPLIT = HERE / "data", HERE / "labels.jsonl", HERE / "split.json"
CURRENT_TASKS = HERE / "current_tasks.json.gz"
"""The same tasks as τ²-bench publishes them now (airline and retail ``tasks.json``, only the ids used here), passed
as ``--tasks``: the revision check then tells a run that misses the corrected task too from one that doesn't."""


@dataclass
class Scored:
    hand: dict[str, HandLabel]
    result: AnalysisResult
    counted: dict[str, bool]
    trajectories: dict[str, Trajectory]

    def figures(self, split: str | None = None) -> Agreement:
        only = {i for i, h in self.hand.items() if split is None or h.split == split}
        return agreement(self.hand, self.result.labels[0], self.counted, only)


def unpacked(into: Path) -> list[Path]:
    """The stored ``*.json.gz`` Results files, unpacked under their own names (the names give the ids)."""
    out = []
    for gz in sorted(DATA.glob("*.json.gz")):
        target = into / gz.name.removesuffix(".gz")
        with gzip.open(gz, "rb") as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        out.append(target)
    return out


def current_tasks(tmp: Path) -> TaskIndex:
    tasks_file = tmp / "tasks.json"
    with gzip.open(CURRENT_TASKS, "rb") as src, tasks_file.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return load_tasks([tasks_file])


def run(split: str | None = None) -> Scored:
    """Analyse every stored trajectory together (as one ``factory analyze`` run would) and keep the labels."""
    hand = load_hand_labels(LABELS)
    with tempfile.TemporaryDirectory() as tmp:
        imported = load_trajectories(unpacked(Path(tmp)))
        tasks = current_tasks(Path(tmp))
    trajectories = [t for t in imported.trajectories if split is None or hand[t.id].split == split]
    result = analyze(trajectories, AnalyzeConfig(bootstrap=0), tasks=tasks)
    counted = {t.id: t.success or result.attributions[t.id].attributable for t in trajectories}
    return Scored(hand, result, counted, {t.id: t for t in trajectories})


if __name__ == "__main__":
    import sys

    which = sys.argv[1] if len(sys.argv) > 1 else "tune"
    scored = run(which if which != "all" else None)
    fig = scored.figures(which if which != "all" else None)
    print(fig.line())
    for kind in ("misses", "wrong", "unspared"):
        for item in getattr(fig, kind):
            print(f"  {kind}: {item}")
    print(json.dumps(fig.figures()))
