"""How the offline labeler and the attribution do on the hand-labelled set, against the hand labels.

- recall: share of agent-caused failures that are counted as the agent's and get at least one right
  LACKING label (a capability in the case's ``lacking`` or ``also``);
- precision: share of LACKING labels, on trajectories that enter the statistics, whose capability is right;
- spared: failures that are not the agent's and are left out of the statistics (or carry no LACKING label);
- blamed: successes with a LACKING label the hand labels do not give.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from factory.analyze.agreement import Agreement
from factory.analyze.catalogue import canonical
from factory.analyze.pipeline import AnalyzeConfig, analyze
from factory.analyze.tasks import load_tasks
from schemas.capability import CapabilityLabel, TrajectoryLabel
from tests.analyze.handlabelled import airline, fresh, retail
from tests.analyze.handlabelled.dsl import Built, Case, Domains, build

ALL_CASES: list[Case] = airline.CASES + retail.CASES + fresh.CASES


class Figures(Agreement):
    """The product's agreement figures (factory.analyze.agreement), printed under a split's name."""

    def line(self, name: str) -> str:  # type: ignore[override]
        return f"{name}: {super().line()}"


@dataclass
class Scored:
    built: list[Built]
    labels: dict[str, list[TrajectoryLabel]]
    counted: dict[str, bool]


def run(root: Path) -> Scored:
    """Build every case and analyse them together, as ``factory analyze`` would, with the current tasks files."""
    domains = Domains(root)
    built = [build(case, domains) for case in ALL_CASES]
    tasks = load_tasks([root / "airline" / "tasks.json", root / "retail" / "tasks.json"])
    result = analyze([b.trajectory for b in built], AnalyzeConfig(bootstrap=0), tasks=tasks)
    labels: dict[str, list[TrajectoryLabel]] = {}
    for label in result.labels[0]:
        labels.setdefault(label.trajectory_id, []).append(label)
    counted = {b.case.id: b.trajectory.success or result.attributions[b.case.id].attributable for b in built}
    return Scored(built, labels, counted)


def figures(scored: Scored, split: str | None = None) -> Figures:
    out = Figures()
    for b in scored.built:
        case = b.case
        if split is not None and case.split != split:
            continue
        lacking = [l for l in scored.labels.get(case.id, []) if l.label == CapabilityLabel.LACKING]
        right = {canonical(c) for c in (*case.lacking, *case.also)}  # the hand labels predate the alias
        counted = scored.counted[case.id]
        if counted:
            out.lacking_labels += len(lacking)
            out.right_labels += sum(1 for l in lacking if l.capability in right)
            out.wrong += [f"{case.id}: {l.capability}: {l.reason}" for l in lacking if l.capability not in right]
        if case.expect == "success":
            out.successes += 1
            out.blamed += any(l.capability not in right for l in lacking)
        elif case.cause == "agent":
            out.agent_failures += 1
            if counted and any(l.capability in right for l in lacking):
                out.found += 1
            else:
                out.misses.append(f"{case.id}: wanted {sorted(case.lacking)}, got {sorted(l.capability for l in lacking)}"
                                  + ("" if counted else " (not counted as the agent's)"))
        else:
            out.other_failures += 1
            if not counted or not lacking:
                out.spared += 1
            else:
                out.unspared.append(case.id)
    return out
