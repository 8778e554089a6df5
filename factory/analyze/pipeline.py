"""The analysis end to end: candidates (catalogue and/or discovery) -> N labeling runs -> statistics ->
selection -> ``CapabilityReport``. No I/O and no display here; the command does those."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from factory.analyze.catalogue import builtin_capabilities
from factory.analyze.discovery import discover_capabilities
from factory.analyze.errors import AnalyzeInputError
from factory.analyze.gold import GoldIndex
from factory.analyze.labeling import LLMLabeler, label_runs_llm, label_runs_offline
from factory.analyze.offline import OfflineLabeler
from factory.analyze.stats import LabelMatrix, capability_statistics, example_failures, failures_covered, overlap
from factory.llm.base import LLMClient
from schemas.capability import Capability, CapabilityFinding, CapabilityReport, TrajectoryLabel
from schemas.trajectory import Trajectory

StageProgress = Callable[[str, int, int], None]


class AnalyzeConfig(BaseModel):
    """The knobs of an analysis; defaults are the paper's (δ = 0.20, ρ = 0.10, K = 8 of N = 10)."""

    runs: int = Field(default=10, ge=1, le=100)
    delta: float = Field(default=0.20, ge=-1.0, le=1.0)
    coverage: float = Field(default=0.10, ge=0.0, le=1.0)
    min_runs: int | None = Field(default=None, ge=1, description="K; default ceil(0.8 * runs)")
    catalogue: Literal["seed", "only", "off"] = "seed"
    batch_size: int = Field(default=4, ge=1, le=50)
    concurrency: int = Field(default=8, ge=1, le=256)
    discovery_samples: int = Field(default=12, ge=1, le=200)
    max_attempts: int = Field(default=3, ge=1, le=10)
    bootstrap: int = Field(default=1000, ge=0, le=100_000)
    seed: int = 0

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


def analyze(
    trajectories: list[Trajectory],
    config: AnalyzeConfig,
    *,
    client: LLMClient | None = None,
    gold: GoldIndex | None = None,
    sources: list[str] | None = None,
    progress: StageProgress | None = None,
) -> AnalysisResult:
    """Run the analysis. Without ``client`` the offline labeler labels the built-in catalogue."""
    if not trajectories:
        raise AnalyzeInputError("no trajectories in the input")
    notes: list[str] = []
    n_fail = sum(1 for t in trajectories if not t.success)
    if n_fail == 0:
        notes.append("no failed trajectories: ER- and coverage are undefined or zero, nothing can be selected")
    if n_fail == len(trajectories):
        notes.append("no successful trajectories: ER+ and so Δ are undefined, nothing can be selected")

    def stage(name: str) -> Callable[[int, int], None]:
        return lambda done, total: progress(name, done, total) if progress else None

    if client is None:
        if config.catalogue == "off":
            raise AnalyzeInputError("--catalogue off needs an LLM (--llm) for discovery; the offline labeler knows only the built-in catalogue")
        capabilities = builtin_capabilities()
        offline = OfflineLabeler(gold)
        with_gold = sum(1 for t in trajectories if offline.has_gold(t))
        if with_gold == 0:
            notes.append("no gold actions for any trajectory (pass --tasks tasks.json): only the schema, error-recovery and read-before-write rules could apply")
        elif with_gold < len(trajectories):
            notes.append(f"gold actions found for {with_gold} of {len(trajectories)} trajectories; the others are NA for gold-based rules")
        labels = label_runs_offline(offline, trajectories, capabilities, config.runs, progress=stage("labeling"))
        labeler_name, discovery = "offline", "catalogue"
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
            labeler, trajectories, capabilities, config.runs, batch_size=config.batch_size, concurrency=config.concurrency, progress=stage("labeling")
        )
        if labeler.failed_batches:
            notes.append(f"{labeler.failed_batches} labeling batch(es) never got a valid reply and were labeled NA")
        labeler_name = labeler.name

    outcomes = {t.id: t.success for t in trajectories}
    names = [c.name for c in capabilities]
    matrix = LabelMatrix.build(outcomes, names, labels)
    stats = capability_statistics(
        matrix, delta=config.delta, rho=config.coverage, min_runs=config.min_runs or 1, bootstrap=config.bootstrap, seed=config.seed
    )
    findings = []
    for capability, figures in zip(capabilities, stats):
        examples = list(dict.fromkeys(capability.example_failure_ids + example_failures(matrix, capability.name)))[:5]
        findings.append(CapabilityFinding(name=capability.name, description=capability.description, example_failure_ids=examples, stats=figures))
    selected = sorted((f for f in findings if f.stats.selected), key=lambda f: (-f.stats.coverage, f.name))
    usage = client.usage.model_dump() if client is not None else None
    report = CapabilityReport(
        targets=sorted({t.target for t in trajectories}),
        sources=list(sources or []),
        labeler=labeler_name,
        discovery=discovery,
        runs=config.runs,
        delta=config.delta,
        coverage_threshold=config.coverage,
        min_runs=config.min_runs or 1,
        n_trajectories=len(trajectories),
        n_successes=len(trajectories) - n_fail,
        n_failures=n_fail,
        capabilities=selected,
        candidates=findings,
        overlap=overlap(matrix),
        failures_covered=failures_covered(matrix, [f.name for f in selected]),
        llm_usage=usage,
        notes=notes,
    )
    return AnalysisResult(report=report, matrix=matrix, labels=labels, capabilities=capabilities)
