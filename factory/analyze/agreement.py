"""Agreement of a labeler with hand labels: the figures ``factory analyze`` reports so a user knows how far to
trust its labels (see ``measured.json``), and that ``--labels FILE`` recomputes for any run.

A hand-labels file is JSON Lines, one object per trajectory: ``id`` (the trajectory id the importer gives),
``outcome`` (``success`` or ``failure``), ``cause`` (``agent``, ``user_simulator``, ``task`` or ``none``),
``lacking`` (capability -> one sentence of reason) and ``also`` (capabilities that would also be right).

- recall: agent-caused failures that are counted as the agent's and get at least one right LACKING label;
- precision: LACKING labels, on trajectories that enter the statistics, whose capability is right;
- spared: failures that are not the agent's and are left out of the statistics or carry no LACKING label;
- blamed: successes with a LACKING label the hand labels do not give.
"""

from __future__ import annotations

import json
from pathlib import Path
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from factory.analyze.errors import AnalyzeInputError
from schemas.capability import CapabilityLabel, TrajectoryLabel
from schemas.errors import one_line


class HandLabel(BaseModel):
    id: str
    outcome: Literal["success", "failure"]
    cause: Literal["agent", "user_simulator", "task", "none"]
    lacking: dict[str, str] = Field(default_factory=dict)
    also: list[str] = Field(default_factory=list)
    split: str = ""
    note: str = ""

    @property
    def right(self) -> set[str]:
        return set(self.lacking) | set(self.also)


class Agreement(BaseModel):
    labelled: int = 0
    agent_failures: int = 0
    found: int = 0
    lacking_labels: int = 0
    right_labels: int = 0
    other_failures: int = 0
    spared: int = 0
    successes: int = 0
    blamed: int = 0
    misses: list[str] = Field(default_factory=list)
    wrong: list[str] = Field(default_factory=list)
    unspared: list[str] = Field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.found / self.agent_failures if self.agent_failures else 0.0

    @property
    def precision(self) -> float:
        return self.right_labels / self.lacking_labels if self.lacking_labels else 1.0

    def line(self) -> str:
        return (f"{self.found}/{self.agent_failures} agent-caused failures with a right label (recall {self.recall:.2f}); "
                f"{self.right_labels}/{self.lacking_labels} LACKING labels right (precision {self.precision:.2f}); "
                f"{self.spared}/{self.other_failures} other failures spared; {self.blamed}/{self.successes} successes blamed")

    def figures(self) -> dict[str, float | int]:
        keys = ("labelled", "agent_failures", "found", "lacking_labels", "right_labels", "other_failures", "spared", "successes", "blamed")
        return {**{k: getattr(self, k) for k in keys}, "recall": round(self.recall, 4), "precision": round(self.precision, 4)}


def load_hand_labels(path: Path) -> dict[str, HandLabel]:
    """Read a hand-labels JSONL file; a bad line is one clear AnalyzeInputError."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AnalyzeInputError(f"{path}: cannot read the labels file ({exc.strerror or exc})") from None
    out: dict[str, HandLabel] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            label = HandLabel.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise AnalyzeInputError(f"{path}:{n}: not a hand label ({one_line(exc)[:300]}); each line needs id, outcome, cause, lacking") from None
        out[label.id] = label
    return out


def agreement(
    hand: dict[str, HandLabel], labels: list[TrajectoryLabel], counted: dict[str, bool], only: set[str] | None = None
) -> Agreement:
    """Score the labeler's LACKING labels against the hand labels, over the trajectories both know (or ``only``)."""
    by_id: dict[str, list[TrajectoryLabel]] = {}
    for label in labels:
        if label.label == CapabilityLabel.LACKING:
            by_id.setdefault(label.trajectory_id, []).append(label)
    out = Agreement()
    for tid, case in hand.items():
        if tid not in counted or (only is not None and tid not in only):
            continue
        out.labelled += 1
        lacking = by_id.get(tid, [])
        right = case.right
        if counted[tid]:
            out.lacking_labels += len(lacking)
            out.right_labels += sum(1 for l in lacking if l.capability in right)
            out.wrong += [f"{tid}: {l.capability}: {l.reason}" for l in lacking if l.capability not in right]
        if case.outcome == "success":
            out.successes += 1
            out.blamed += any(l.capability not in right for l in lacking)
        elif case.cause == "agent":
            out.agent_failures += 1
            if counted[tid] and any(l.capability in right for l in lacking):
                out.found += 1
            else:
                out.misses.append(f"{tid}: wanted {sorted(case.lacking)}, got {sorted(l.capability for l in lacking)}"
                                  + ("" if counted[tid] else " (not counted as the agent's)"))
        else:
            out.other_failures += 1
            if not counted[tid] or not lacking:
                out.spared += 1
            else:
                out.unspared.append(f"{tid} ({case.cause}): " + "; ".join(f"{l.capability}: {l.reason}" for l in lacking))
    return out


def measured() -> dict[str, Any] | None:
    """The offline labeler's figures on the hand-labelled real set (``measured.json``, written at release by
    ``tests/analyze/real/measure.py``), or None when the package lacks the file."""
    try:
        return json.loads(resources.files(__package__).joinpath("measured.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def measured_summary(data: dict[str, Any]) -> dict[str, Any]:
    """What a report states about the offline labeler: the set, and the figures of its freshest holdout (the one
    no rule was tuned on: the highest-numbered ``holdoutN``) and of the whole set."""
    figures = data.get("figures", {})
    return {"source": "measured", "labeler": data.get("labeler", "offline"), "set": data.get("set", {}),
            "holdout": figures.get(_freshest(figures)), "all": figures.get("all")}  # fmt: skip


def _freshest(figures: dict[str, Any]) -> str:
    """The holdout drawn last: ``holdout`` is the first, ``holdoutN`` the N-th."""
    parts = [k for k in figures if k == "holdout" or (k.startswith("holdout") and k[7:].isdigit())]
    return max(parts, key=lambda k: int(k[7:] or 1), default="holdout")


def summary_line(agreement_: dict[str, Any]) -> str:
    """One sentence for the report's notes and the CLI."""
    if agreement_.get("source") == "measured":
        s, h, a = agreement_.get("set", {}), agreement_.get("holdout") or {}, agreement_.get("all") or {}
        return (f"the offline labeler was measured against hand labels of {s.get('trajectories')} real τ² trajectories "
                f"({len(s.get('agents', {}))} agents): on the holdout recall {h.get('recall', 0):.2f} ({h.get('found')}/{h.get('agent_failures')} "
                f"agent-caused failures with a right label), precision {h.get('precision', 0):.2f} ({h.get('right_labels')}/{h.get('lacking_labels')}); "
                f"on all of it recall {a.get('recall', 0):.2f}, precision {a.get('precision', 0):.2f}; trust its labels that far")
    f = agreement_.get("figures") or {}
    return (f"agreement with the hand labels in {agreement_.get('source')} ({f.get('labelled')} trajectories, labeling run 1): "
            f"recall {f.get('recall', 0):.2f} ({f.get('found')}/{f.get('agent_failures')}), precision {f.get('precision', 0):.2f} "
            f"({f.get('right_labels')}/{f.get('lacking_labels')}), {f.get('spared')}/{f.get('other_failures')} other failures spared, "
            f"{f.get('blamed')}/{f.get('successes')} successes blamed")
