"""Capabilities, their per-trajectory labels and the statistics that select them (TRACE step 2)."""

from __future__ import annotations

from typing import Any

import enum
import json
from pathlib import Path
from datetime import datetime, timezone

from pydantic import BaseModel, Field, ValidationError

from schemas.errors import InputError, validation_message
from schemas.files import InputFileError, read_text
from schemas.names import CAPABILITY_PATTERN


class CapabilityLabel(str, enum.Enum):
    NA = "NA"
    PRESENT = "PRESENT"
    LACKING = "LACKING"


class Capability(BaseModel):
    """A named skill the agent may lack, e.g. ``precondition_verification``."""

    name: str = Field(pattern=CAPABILITY_PATTERN)
    description: str
    example_failure_ids: list[str] = Field(default_factory=list)


EvidenceValue = str | int | float | bool | None | list[str | int | float | bool | None]


class LabelEvidence(BaseModel):
    """What a label rests on, so a reader can check it in seconds: where in the trajectory (message index), which
    rule, and the values it compared (what the agent did or said against what the records or the user said)."""

    rule: str = Field(description="the rule that fired, e.g. 'cancel_without_ground'")
    message_index: int | None = Field(default=None, ge=0, description="index in the trajectory's messages of the call or text judged")
    compared: dict[str, EvidenceValue] = Field(default_factory=dict, description="the values compared, by name")


class TrajectoryLabel(BaseModel):
    """One (trajectory, capability) label. ``confidence`` is how far the labeler trusts the label (the selection
    weighs labels by it); ``abstained`` marks an NA given because the evidence was too thin to decide, not
    because the episode gave no occasion."""

    trajectory_id: str
    capability: str
    label: CapabilityLabel
    reason: str = ""
    confidence: float = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    abstained: bool = False
    evidence: list[LabelEvidence] = Field(default_factory=list)


class Interval(BaseModel):
    """A confidence interval (bootstrap percentile interval in ``factory analyze``)."""

    low: float
    high: float
    level: float = 0.95


class RunFigures(BaseModel):
    """One labeling run's figures for one capability, and whether that run selected it."""

    run: int
    er_success: float | None
    er_failure: float | None
    gap: float | None
    coverage: float
    selected: bool
    n_success_labeled: int = Field(default=0, description="successes labeled PRESENT or LACKING (the ER+ denominator)")
    n_failure_labeled: int = Field(default=0, description="counted failures labeled PRESENT or LACKING (the ER- denominator)")


class CapabilityStats(BaseModel):
    """ER+ / ER- are lacking rates among non-NA successes / failures; gap = ER- - ER+.

    Over several labeling runs the figures are means over runs (ignoring runs where a rate is undefined);
    ``per_run`` keeps each run's figures. ``coverage`` is the share of all counted failures labeled LACKING
    (failures that are not the agent's fault are not counted unless the analysis was told to).
    ``n_success_labeled`` / ``n_failure_labeled`` are the labeled trajectories the rates rest on (fewest
    over runs); ``support_warning`` says when they are too few to trust.
    """

    capability: str
    er_success: float | None
    er_failure: float | None
    gap: float | None
    coverage: float
    selected_runs: int = 0
    total_runs: int = 0
    selected: bool = False
    gap_ci: Interval | None = None
    coverage_ci: Interval | None = None
    per_run: list[RunFigures] = Field(default_factory=list)
    n_successes: int = 0
    n_failures: int = 0
    n_success_labeled: int = 0
    n_failure_labeled: int = 0
    support_warning: str | None = None


class CapabilityOverlap(BaseModel):
    """How often two capabilities are both LACKING on the same failed trajectory (majority label over runs)."""

    a: str
    b: str
    both: int
    either: int
    jaccard: float


class CapabilityFinding(Capability):
    """A candidate capability with its statistics; ``example_failure_ids`` are failures where it is LACKING."""

    stats: CapabilityStats


class CapabilityReport(BaseModel):
    """``capabilities.json``, written by ``factory analyze`` and read by ``factory build --report``.

    ``capabilities`` are the selected ones (in order of coverage); ``candidates`` holds every capability that
    was labeled, selected or not, so the choice can be audited.
    """

    schema_version: int = 1
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    targets: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    labeler: str = Field(description="'offline' or the LLM spec, e.g. 'openai:gpt-4.1'")
    discovery: str = Field(default="catalogue", description="where the candidates came from: catalogue, llm or catalogue+llm")
    runs: int = Field(ge=1)
    deterministic: bool = Field(default=False, description="the labeler gives the same labels every time, so it ran once")
    resamples: int = Field(default=0, ge=0, description="N when K of N counts resamples of the tasks (a deterministic labeler), else 0")
    delta: float
    coverage_threshold: float
    min_runs: int = Field(ge=1)
    n_trajectories: int
    n_successes: int
    n_failures: int = Field(description="failures counted in the statistics")
    n_unattributable: int = Field(default=0, description="failures not attributed to the agent (excluded unless include_unattributable)")
    unattributable: dict[str, int] = Field(default_factory=dict, description="not-attributable failures by cause")
    include_unattributable: bool = False
    bootstrap_unit: str = Field(default="trajectory", description="'task' when tasks repeat (cluster bootstrap), else 'trajectory'")
    capabilities: list[CapabilityFinding] = Field(default_factory=list)
    candidates: list[CapabilityFinding] = Field(default_factory=list)
    overlap: list[CapabilityOverlap] = Field(default_factory=list)
    failures_covered: int = Field(default=0, description="failures where at least one selected capability is LACKING")
    llm_usage: dict[str, float | int | None] | None = None
    agreement: dict[str, Any] | None = Field(
        default=None,
        description="how far the labeler's LACKING labels agree with hand labels: the offline labeler's figures measured on a hand-labelled "
        "real set (source 'measured'), or this run's own against a --labels file",
    )
    notes: list[str] = Field(default_factory=list)


def load_capability_report(path: str | Path, flag: str = "--report", error: type[Exception] = InputError) -> CapabilityReport:
    """Read ``capabilities.json`` (``factory build --report``, ``factory route --capabilities``, the pipeline's
    route stage); a bad file (missing, a folder, binary, another schema) raises ``error`` with one line naming ``flag``."""
    expected = "the capabilities.json written by `factory analyze`"
    try:
        text = read_text(path, f"{flag} {path}", expected)
    except InputFileError as exc:
        raise error(str(exc)) from None
    supported = CapabilityReport.model_fields["schema_version"].default
    try:
        declared = json.loads(text).get("schema_version", supported)
    except (ValueError, AttributeError, RecursionError):
        declared = supported  # not a JSON object: the validation below says what is wrong
    if declared != supported:
        raise error(
            f"{flag} {path}: schema_version {declared!r} is not supported (allowed: {supported}); "
            f"write it again with this version's `factory analyze`"
        )
    try:
        return CapabilityReport.model_validate_json(text)
    except ValidationError as exc:
        raise error(f"{flag} {path}: not a capabilities.json from `factory analyze` ({validation_message(exc, limit=3)})") from None
