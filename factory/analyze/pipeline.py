"""The analysis end to end: tasks and their versions -> who is to blame for each failure -> candidates
(catalogue and/or discovery) -> labeling -> statistics -> selection -> ``CapabilityReport``. No I/O and no
display here; the command does those."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from factory.analyze.attribution import CAUSE_TEXT, Attribution, attribute
from factory.analyze.catalogue import builtin_capabilities
from factory.analyze.discovery import discover_capabilities
from factory.analyze.errors import AnalyzeInputError
from factory.analyze.labeling import LLMLabeler, label_runs_llm, label_runs_offline
from factory.analyze.agreement import agreement, load_hand_labels, measured, measured_summary, summary_line
from factory.analyze.offline import OfflineLabeler
from factory.analyze.revisions import Resolution, resolve
from schemas.label_matrix import LabelMatrix
from factory.analyze.stats import capability_statistics, example_failures, failures_covered, overlap
from factory.analyze.tasks import TaskIndex, trajectory_domain
from llm_clients.base import LLMClient
from schemas.capability import Capability, CapabilityFinding, CapabilityReport, TrajectoryLabel
from schemas.trajectory import Trajectory

StageProgress = Callable[[str, int, int], None]


class AnalyzeConfig(BaseModel):
    """The knobs of an analysis; defaults are the paper's (δ = 0.20, ρ = 0.10, K = 8 of N = 10). The offline
    labeler is deterministic and labels once; with ``runs`` N > 1 its K of N counts N resamples of the tasks."""

    runs: int = Field(default=10, ge=1, le=100)
    delta: float = Field(default=0.20, ge=0.0, le=1.0, allow_inf_nan=False)
    coverage: float = Field(default=0.10, ge=0.0, le=1.0, allow_inf_nan=False)
    min_runs: int | None = Field(default=None, ge=1, description="K; default ceil(0.8 * runs)")
    catalogue: Literal["seed", "only", "off"] = "seed"
    batch_size: int = Field(default=4, ge=1, le=50)
    concurrency: int = Field(default=8, ge=1, le=256)
    discovery_samples: int = Field(default=12, ge=1, le=200)
    max_attempts: int = Field(default=3, ge=1, le=10)
    bootstrap: int = Field(default=1000, ge=0, le=100_000)
    seed: int = Field(default=0, ge=0)
    include_unattributable: bool = False
    labels: Path | None = Field(default=None, description="hand labels (JSONL) to score this run's labels against (--labels)")

    @model_validator(mode="after")
    def _k_within_n(self) -> "AnalyzeConfig":
        if self.min_runs is None:
            self.min_runs = max(1, math.ceil(0.8 * self.runs))
        if self.min_runs > self.runs:
            raise ValueError(f"--min-runs {self.min_runs} exceeds --runs {self.runs}")
        return self


@dataclass
class AnalysisResult:
    report: CapabilityReport
    matrix: LabelMatrix
    labels: list[list[TrajectoryLabel]]
    capabilities: list[Capability]
    attributions: dict[str, Attribution] = field(default_factory=dict)
    resolution: Resolution = field(default_factory=Resolution)


def task_cluster(trajectory: Trajectory, resolution: Resolution) -> str:
    """The task a trajectory is a trial of, across files and agents (τ-bench records by their τ² match)."""
    check = resolution.checks.get(trajectory.id)
    domain = trajectory_domain(trajectory) or trajectory.target
    if trajectory.source == "tau-bench":
        return f"{domain}:{check.reference_id}" if check is not None and check.reference_id else f"tau-bench:{domain}:{trajectory.task_id}"
    return f"{domain}:{trajectory.task_id}"


def _attribution_notes(attributions: dict[str, Attribution], trajectories: list[Trajectory], include: bool) -> tuple[list[str], dict[str, int]]:
    failed = [t for t in trajectories if not t.success]
    causes = Counter(attributions[t.id].cause for t in failed if not attributions[t.id].attributable)
    if not causes:
        return [], {}
    listed = ", ".join(f"{n} {CAUSE_TEXT[c]}" for c, n in causes.most_common())
    what = "included in the failures (--include-unattributable)" if include else "left out of the failures (pass --include-unattributable to count them)"
    return [f"{sum(causes.values())} of {len(failed)} failures are not attributable to the agent ({listed}); {what}"], dict(causes)


def _agreement(config: AnalyzeConfig, labeler_name: str, labels: list[list[TrajectoryLabel]], trajectories: list[Trajectory],
               counted: dict[str, bool]) -> dict | None:  # fmt: skip
    """This run's agreement with ``--labels`` when given; else, for the offline labeler, its measured figures."""
    if config.labels is not None:
        hand = load_hand_labels(config.labels)  # read once already at the start, so a bad file fails before any labeling
        known = {t.id for t in trajectories} & set(hand)
        if not known:
            raise AnalyzeInputError(f"{config.labels}: none of its ids is a trajectory of this run (ids look like {trajectories[0].id!r})")
        figures = agreement(hand, labels[0], counted, known)
        return {"source": str(config.labels), "labeler": labeler_name, "figures": figures.figures()}
    data = measured() if labeler_name == "offline" else None
    return measured_summary(data) if data else None


def analyze(
    trajectories: list[Trajectory],
    config: AnalyzeConfig,
    *,
    client: LLMClient | None = None,
    tasks: TaskIndex | None = None,
    sources: list[str] | None = None,
    progress: StageProgress | None = None,
) -> AnalysisResult:
    """Run the analysis. Without ``client`` the offline labeler labels the built-in catalogue."""
    if not trajectories:
        raise AnalyzeInputError("no trajectories in the input")
    if config.labels is not None:
        load_hand_labels(config.labels)
    resolution = resolve(trajectories, tasks)
    attributions = {
        t.id: attribute(t, resolution.tasks.get(t.id), resolution.checks.get(t.id), resolution.references.get(t.id)) for t in trajectories
    }
    counted = {t.id: t.success or config.include_unattributable or attributions[t.id].attributable for t in trajectories}
    notes = list(resolution.notes)
    attribution_notes, causes = _attribution_notes(attributions, trajectories, config.include_unattributable)
    notes += attribution_notes
    n_fail = sum(1 for t in trajectories if not t.success and counted[t.id])
    n_success = sum(1 for t in trajectories if t.success)
    if n_fail == 0:
        notes.append("no failures attributable to the agent: ER- and coverage are undefined or zero, nothing can be selected")
    if n_success == 0:
        notes.append("no successful trajectories: ER+ and so Δ are undefined, nothing can be selected")

    def stage(name: str) -> Callable[[int, int], None]:
        return lambda done, total: progress(name, done, total) if progress else None

    runs, min_runs, deterministic, resamples = config.runs, config.min_runs or 1, False, 0
    if client is None:
        if config.catalogue == "off":
            raise AnalyzeInputError("--catalogue off needs an LLM (--llm) for discovery; the offline labeler knows only the built-in catalogue")
        capabilities = builtin_capabilities()
        offline = OfflineLabeler(resolution.tasks)
        labels = label_runs_offline(offline, trajectories, capabilities, progress=stage("labeling"))
        labeler_name, discovery, deterministic = "offline", "catalogue", True
        if runs > 1:
            resamples = runs
            notes.append(f"the offline labeler is deterministic, so it labeled once; a capability is kept when at least K = {min_runs} of "
                         f"N = {runs} resamples of the tasks select it")  # fmt: skip
        else:
            min_runs = 1
        runs = 1
        without_task = sum(1 for t in trajectories if resolution.tasks.get(t.id) is None)
        if without_task:
            notes.append(f"{without_task} trajectory(ies) have no task instructions: rules that need them are NA there")
    else:
        seed = builtin_capabilities() if config.catalogue in ("seed", "only") else []
        if config.catalogue == "only":
            capabilities, discovery = seed, "catalogue"
        else:
            if progress:
                progress("discovery", 0, 1)
            capabilities = discover_capabilities(
                client, trajectories, seed_catalogue=seed, per_group=config.discovery_samples, seed=config.seed, max_attempts=config.max_attempts
            )
            if progress:
                progress("discovery", 1, 1)
            discovery = "catalogue+llm" if seed else "llm"
        labeler = LLMLabeler(client, max_attempts=config.max_attempts, seed=config.seed)
        labels = label_runs_llm(
            labeler, trajectories, capabilities, runs, batch_size=config.batch_size, concurrency=config.concurrency, progress=stage("labeling")
        )
        if labeler.failed_batches:
            notes.append(f"{labeler.failed_batches} labeling batch(es) never got a valid reply and were labeled NA")
        labeler_name = labeler.name

    outcomes = {t.id: t.success for t in trajectories}
    names = [c.name for c in capabilities]
    clusters = {t.id: task_cluster(t, resolution) for t in trajectories}
    matrix = LabelMatrix.build(outcomes, names, labels, counted=counted, clusters=clusters)
    stats = capability_statistics(
        matrix, delta=config.delta, rho=config.coverage, min_runs=min_runs, bootstrap=config.bootstrap, seed=config.seed, resamples=resamples
    )
    findings = []
    for capability, figures in zip(capabilities, stats):
        examples = list(dict.fromkeys(capability.example_failure_ids + example_failures(matrix, capability.name)))[:5]
        findings.append(CapabilityFinding(name=capability.name, description=capability.description, example_failure_ids=examples, stats=figures))
    selected = sorted((f for f in findings if f.stats.selected), key=lambda f: (-f.stats.coverage, f.name))
    thin = [f.name for f in findings if f.stats.support_warning]
    if thin:
        notes.append(f"fewer than 10 labeled successes or failures behind: {', '.join(thin)} (see each capability's counts)")
    agreement_ = _agreement(config, labeler_name, labels, trajectories, counted)
    if agreement_ is not None:
        notes.append(summary_line(agreement_))
    report = CapabilityReport(
        targets=sorted({t.target for t in trajectories}),
        sources=list(sources or []),
        labeler=labeler_name,
        discovery=discovery,
        runs=runs,
        deterministic=deterministic,
        resamples=resamples,
        delta=config.delta,
        coverage_threshold=config.coverage,
        min_runs=min_runs,
        n_trajectories=len(trajectories),
        n_successes=n_success,
        n_failures=n_fail,
        n_unattributable=sum(causes.values()),
        unattributable=causes,
        include_unattributable=config.include_unattributable,
        bootstrap_unit="task" if matrix.clustered else "trajectory",
        capabilities=selected,
        candidates=findings,
        overlap=overlap(matrix),
        failures_covered=failures_covered(matrix, [f.name for f in selected]),
        llm_usage=client.usage.model_dump() if client is not None else None,
        agreement=agreement_,
        notes=notes,
    )
    return AnalysisResult(report=report, matrix=matrix, labels=labels, capabilities=capabilities, attributions=attributions, resolution=resolution)
