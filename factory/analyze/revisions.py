"""Which version of its task each run used, and whether the benchmark has corrected that task since.

A failure on a task whose gold the benchmark later corrected says nothing about the agent, so such failures
are reported as not attributable. The check never replaces the task a run used: the labeler always reads
the task the simulated user was given. Sources of a reference version, in order:

- ``--tasks`` files: for τ² runs, the same (domain, id); for τ-bench v1 records, the τ² task with the same
  content (user, gold writes, instructions), because τ-bench ids are list positions, not τ² ids;
- for τ² runs without ``--tasks``: the known revisions of τ²'s airline and retail tasks (first release,
  2025-06-10, against τ³-bench 1.0.0, 2026-03-18), kept here as fingerprints.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from factory.analyze.tasks import TaskIndex, TaskSpec, canonical_sha256, embedded_task, trajectory_domain
from schemas.trajectory import Trajectory

KNOWN_TAU2_REVISIONS: dict[str, dict[str, dict[str, str]]] = {
    "airline": {
        "2": {"criteria": "bf0138495ccbb05a", "scenario": "842b41e511166f9d"},
        "5": {"scenario": "d1d98b946993df56"},
        "7": {"criteria": "1ee29d86e3d15d60", "scenario": "65ab3975c6570e0b"},
        "9": {"criteria": "79e267ab93dc8a35"},
        "12": {"scenario": "cc879f21b23f5db0"},
        "13": {"scenario": "3a1f6280e654e564"},
        "14": {"criteria": "b3ef0467a7951a27", "scenario": "da7772e7d6caa1ce"},
        "15": {"scenario": "0d6e67b990d32c15"},
        "16": {"scenario": "a130095197608131"},
        "18": {"scenario": "a759539916436734"},
        "19": {"scenario": "f83793cddb2ab003"},
        "21": {"scenario": "4a4f8a38cf591ac4"},
        "23": {"criteria": "793e1b8405dd0380", "scenario": "0f767fd71c688a88"},
        "25": {"scenario": "0d578a8afa585940"},
        "27": {"criteria": "bdf84d67695b05ad", "scenario": "3f54538b213c9b8e"},
        "29": {"criteria": "a84e9eabc6bc6266", "scenario": "43ebbf619bdf8ea8"},
        "30": {"scenario": "53d3df74d2a074e1"},
        "32": {"scenario": "bf34251625478697"},
        "33": {"criteria": "eda1fb0fe35a899d"},
        "34": {"scenario": "8ee7138c2f46bdc1"},
        "35": {"criteria": "4f1289f05750022d"},
        "37": {"criteria": "c1e309d985fa9829"},
        "38": {"criteria": "067f63ff19c7c629"},
        "42": {"scenario": "be9948d79bbcf517"},
        "43": {"scenario": "a42367db526734a9"},
        "44": {"criteria": "f89918aaf26b4ca5", "scenario": "68edc7693e37d713"},
        "45": {"scenario": "97e0c73c26688e39"},
    },
    "retail": {
        "0": {"scenario": "71e2daa64bba7328"},
        "1": {"scenario": "184aa425c58905d6"},
        "2": {"scenario": "a01181344bdf5583"},
        "3": {"scenario": "7be7db64ebf0b996"},
        "4": {"scenario": "fed908edb8f8f49d"},
        "10": {"scenario": "2af1c02b3e6c4cd6"},
        "12": {"criteria": "f372d43effe96199"},
        "13": {"criteria": "0c9af44eac625da4"},
        "15": {"scenario": "aba80f66e705cb84"},
        "18": {"criteria": "dc3bdebea02bdf80", "scenario": "11ee8432656b3629"},
        "20": {"scenario": "46130f1182481417"},
        "21": {"criteria": "9a6e9a20c79d5ab1"},
        "22": {"scenario": "7b66061c021dabe1"},
        "28": {"scenario": "8ceac9f6e4b1061c"},
        "29": {"scenario": "df179f0ab0cd0ca9"},
        "33": {"criteria": "d9ecc41a49aa47d0"},
        "34": {"criteria": "431624a78c8bb5c8"},
        "54": {"scenario": "0ea319c7ceb322ce"},
        "55": {"scenario": "e03c3d57e7cf6699"},
        "59": {"criteria": "4c6a3dfc14252ad2"},
        "62": {"scenario": "92a768ea27f703f2"},
        "76": {"scenario": "ddd1bf034fe0c230"},
        "91": {"criteria": "ad0560449afc8325", "scenario": "21a0facea38d862a"},
        "98": {"scenario": "179b5389d7782d47"},
        "99": {"scenario": "7f0b024223c28aea"},
        "100": {"scenario": "3409e2e1b1be626d"},
        "107": {"criteria": "2d4d593882213a0c", "scenario": "cd249905ca99a83f"},
    },
}
"""First-release fingerprints (16 hex digits of ``TaskSpec.criteria`` / ``.scenario``) of the τ² tasks that
τ³-bench 1.0.0 changed. ``tests/analyze/test_revisions.py`` recomputes them from the two task files."""
REVISION_NOTE = "τ² first release (2025-06-10), corrected in τ³-bench 1.0.0 (2026-03-18)"

Status = Literal["current", "revised", "instructions_revised", "unchecked", "supplied", "unmatched", "none"]


class TaskCheck(BaseModel):
    """``revised``: the grading criteria (gold writes or required communications) changed since the run."""

    status: Status
    detail: str = ""
    reference_id: str | None = None


def compare(run: TaskSpec, reference: TaskSpec, where: str, actions_only: bool = False) -> TaskCheck:
    ref_id = reference.id
    run_actions = canonical_sha256(None if run.gold_actions is None else [[a.name, a.arguments] for a in run.gold_actions])
    ref_actions = canonical_sha256(None if reference.gold_actions is None else [[a.name, a.arguments] for a in reference.gold_actions])
    if run_actions != ref_actions:
        return TaskCheck(status="revised", detail=f"gold actions differ from {where}", reference_id=ref_id)
    if not actions_only and run.criteria != reference.criteria:
        return TaskCheck(status="revised", detail=f"required communications differ from {where}", reference_id=ref_id)
    if not actions_only and run.scenario != reference.scenario:
        return TaskCheck(status="instructions_revised", detail=f"user instructions differ from {where}", reference_id=ref_id)
    return TaskCheck(status="current", reference_id=ref_id)


def known_revision(spec: TaskSpec) -> TaskCheck:
    """Against the built-in table of τ² revisions (τ² task ids only)."""
    entry = KNOWN_TAU2_REVISIONS.get(spec.domain or "", {}).get(spec.id)
    if entry is None:
        return TaskCheck(status="unchecked")
    if entry.get("criteria") == spec.criteria[:16]:
        return TaskCheck(status="revised", detail=f"gold or required communications of the {REVISION_NOTE}", reference_id=spec.id)
    if entry.get("scenario") == spec.scenario[:16]:
        return TaskCheck(status="instructions_revised", detail=f"user instructions of the {REVISION_NOTE}", reference_id=spec.id)
    return TaskCheck(status="unchecked")


_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _gold_key(spec: TaskSpec) -> str:
    return json.dumps(sorted((json.dumps([a.name, a.arguments], sort_keys=True) for a in spec.gold_actions or [])))


def match_tau_bench(spec: TaskSpec, index: TaskIndex) -> tuple[TaskSpec | None, str]:
    """The τ² task a τ-bench record corresponds to, by content: same user, then same gold writes, then the
    most similar instructions (with a clear margin). Returns (match, why not) ."""
    candidates = index.specs(spec.domain)
    if not candidates:
        return None, f"no {spec.domain or 'matching-domain'} tasks in --tasks"
    if spec.user_id:
        same_user = [c for c in candidates if c.user_id == spec.user_id or spec.user_id in c.text()
                     or any(a.arguments.get("user_id") == spec.user_id for a in c.gold_actions or [])]  # fmt: skip
        if same_user:
            candidates = same_user
    words = _words(spec.text())
    gold = _gold_key(spec)
    ranked = sorted(((_gold_key(c) == gold, _jaccard(words, _words(c.text())), c.id, c) for c in candidates), key=lambda r: r[:3], reverse=True)
    best = ranked[0]
    if best[1] < 0.25:
        return None, "no τ² task with similar instructions"
    if len(ranked) > 1:
        second = ranked[1]
        if best[0] == second[0] and best[1] - second[1] < 0.05:
            return None, f"ambiguous between τ² tasks {best[2]} and {second[2]}"
    return best[3], ""


@dataclass
class Resolution:
    """Per trajectory id: the task the labeler reads and its version check; notes for the report."""

    tasks: dict[str, TaskSpec | None] = field(default_factory=dict)
    checks: dict[str, TaskCheck] = field(default_factory=dict)
    references: dict[str, TaskSpec] = field(default_factory=dict)  # the corrected task, when --tasks gave it
    notes: list[str] = field(default_factory=list)


def _version_matches(trajectory: Trajectory, reference: TaskSpec) -> bool | None:
    version = trajectory.metadata.get("task_version")
    if not isinstance(version, str) or reference.version is None:
        return None
    return version == reference.version


def _compare_partial(t: Trajectory, run: TaskSpec, reference: TaskSpec) -> tuple[TaskSpec, TaskCheck]:
    """A run that recorded only its gold actions and ``task_version`` (``factory rollout``): the version decides;
    the gold actions say whether the difference touches grading. A current run reads the full task from --tasks."""
    same = _version_matches(t, reference)
    check = compare(run, reference, "--tasks", actions_only=True)
    if same is True:
        return reference, TaskCheck(status="current", reference_id=reference.id)
    if same is False and check.status == "current":
        detail = "task_version differs from --tasks with the same gold actions (communications or instructions changed: the record does not say which)"
        return run, TaskCheck(status="instructions_revised", detail=detail, reference_id=reference.id)
    return run, check


def resolve(trajectories: list[Trajectory], index: TaskIndex | None = None) -> Resolution:
    out = Resolution()
    index = index if index is not None and len(index) else None
    unmatched: dict[str, str] = {}
    for t in trajectories:
        run = embedded_task(t)
        domain = trajectory_domain(t)
        check = TaskCheck(status="none")
        if t.source == "tau-bench":
            if run is not None and index is not None:
                reference, why = match_tau_bench(run, index)
                if reference is None:
                    check = TaskCheck(status="unmatched", detail=why)
                    unmatched[f"{domain or '?'} τ-bench task {t.task_id}"] = why
                else:
                    check = compare(run, reference, f"τ² task {reference.id} in --tasks", actions_only=True)
                    out.references[t.id] = reference
            elif run is not None:
                check = TaskCheck(status="unchecked")
        elif run is not None:
            reference = index.lookup(domain, t.task_id) if index else None
            if reference is not None and run.partial:
                run, check = _compare_partial(t, run, reference)
            else:
                check = compare(run, reference, "--tasks") if reference is not None else known_revision(run)
            if reference is not None:
                out.references[t.id] = reference
        elif index is not None:
            reference = index.lookup(domain, t.task_id)
            if reference is not None:
                run = reference
                same = _version_matches(t, reference)
                if same is False:
                    check = TaskCheck(status="revised", detail="metadata task_version differs from the task in --tasks", reference_id=reference.id)
                else:
                    check = TaskCheck(status="supplied" if same is None else "current", reference_id=reference.id)
        out.tasks[t.id] = run
        out.checks[t.id] = check
    out.notes += _notes(trajectories, out, unmatched, index is not None)
    return out


def task_name(t: Trajectory, check: TaskCheck | None = None) -> str:
    """How a report names a trajectory's task: ``airline 12``, or ``τ-bench airline 3 (τ² 21)``."""
    name = f"{trajectory_domain(t) or '?'} {t.task_id}"
    if t.source == "tau-bench":
        name = "τ-bench " + name + (f" (τ² {check.reference_id})" if check is not None and check.reference_id else "")
    return name


def _sort_key(name: str) -> tuple:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[ ()]+", name) if p)


def _task_list(trajectories: list[Trajectory], resolution: Resolution, status: str) -> tuple[int, str]:
    names = sorted({task_name(t, resolution.checks[t.id]) for t in trajectories if resolution.checks[t.id].status == status}, key=_sort_key)
    shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
    return len(names), shown


def _notes(trajectories: list[Trajectory], resolution: Resolution, unmatched: dict[str, str], have_index: bool) -> list[str]:
    notes = []
    count, shown = _task_list(trajectories, resolution, "revised")
    if count:
        where = "the tasks in --tasks" if have_index else "τ³-bench 1.0.0's corrected tasks"
        notes.append(
            f"{count} task(s) were graded against gold that differs from {where}: {shown}. Each run keeps the task it "
            "used; a failure on such a task is not attributed to the agent when the run does what the corrected task "
            "asks" + (" (or, with no corrected task at hand, always)" if not have_index else "") + "."
        )
    count, shown = _task_list(trajectories, resolution, "instructions_revised")
    if count:
        what = "user instructions that differ from the tasks in --tasks" if have_index else "user instructions revised since the run"
        if any(c.detail.startswith("task_version differs") for c in resolution.checks.values()):
            what += " (for records that carry only their gold actions and task_version: something besides the gold actions)"
        notes.append(f"{count} task(s) have {what}, gold unchanged: {shown}; still attributed to the agent.")
    if unmatched:
        items = "; ".join(f"{k} ({v})" for k, v in sorted(unmatched.items())[:10])
        notes.append(f"{len(unmatched)} τ-bench task(s) could not be matched to a τ² task by content, so their versions are unchecked: {items}.")
    reasons = Counter(resolution.checks[t.id].status for t in trajectories)
    if reasons["unchecked"] and not have_index and any(t.source == "tau-bench" for t in trajectories):
        notes.append("τ-bench records were not checked against τ²'s corrected tasks: pass --tasks <τ² tasks.json> (records are matched by content, never by index).")
    if reasons["none"]:
        notes.append(f"{reasons['none']} trajectory(ies) have no task in their file or in --tasks: rules that need the user's instructions are NA for them.")
    return notes
