"""Agent trajectories on a target, labelled success or failure: the input of capability analysis."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from schemas.messages import Message


class Trajectory(BaseModel):
    """One episode of an agent on one task of a target."""

    id: str = Field(description="unique within a run, e.g. '<task_id>#<trial>'")
    target: str = Field(description="target profile id, e.g. 'tau2-airline'")
    task_id: str
    messages: list[Message]
    reward: float = Field(ge=0.0, le=1.0)
    success: bool
    source: str = Field(default="jsonl", description="importer that produced it")
    metadata: dict[str, Any] = Field(default_factory=dict)
