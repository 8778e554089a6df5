"""Agent trajectories on a target, labelled success or failure: the input of capability analysis."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from schemas.messages import Message


class Trajectory(BaseModel):
    """One episode of an agent on one task of a target.

    ``metadata`` keys the analysis reads (all optional): ``trial`` (int); ``termination_reason`` (τ²-bench
    vocabulary: ``agent_stop``, ``user_stop``, ``max_steps``, ``too_many_errors``, ``agent_error``,
    ``user_error``, ``infrastructure_error``); ``infrastructure_error`` (one line, only when the target or
    infrastructure failed: not the agent's fault); ``reward_detail`` (dict); ``task_version`` (sha256 of the
    task object's canonical JSON: sorted keys, ``(",", ":")`` separators, UTF-8); ``task`` (the task the run
    used, as ``factory.analyze.tasks.TaskSpec``); ``domain``; ``tools`` (tool names the run offered).
    """

    id: str = Field(description="unique within a run, e.g. '<task_id>#<trial>'")
    target: str = Field(description="target profile id, e.g. 'tau2-airline'")
    task_id: str
    messages: list[Message]
    reward: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    success: bool
    source: str = Field(default="jsonl", description="importer that produced it")
    metadata: dict[str, Any] = Field(default_factory=dict)
