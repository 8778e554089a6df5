"""Capabilities, their per-trajectory labels and the statistics that select them (TRACE step 2)."""

from __future__ import annotations

import enum

from pydantic import BaseModel, Field


class CapabilityLabel(str, enum.Enum):
    NA = "NA"
    PRESENT = "PRESENT"
    LACKING = "LACKING"


class Capability(BaseModel):
    """A named skill the agent may lack, e.g. ``precondition_verification``."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{1,63}$")
    description: str
    example_failure_ids: list[str] = Field(default_factory=list)


class TrajectoryLabel(BaseModel):
    trajectory_id: str
    capability: str
    label: CapabilityLabel
    reason: str = ""


class CapabilityStats(BaseModel):
    """ER+ / ER- are lacking rates among non-NA successes / failures; gap = ER- - ER+."""

    capability: str
    er_success: float | None
    er_failure: float | None
    gap: float | None
    coverage: float
    selected_runs: int = 0
    total_runs: int = 0
    selected: bool = False
