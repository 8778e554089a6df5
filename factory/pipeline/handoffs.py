"""What each stage hands the next ones, as models: the one place a stage's output shape is written down.

``pipeline.json`` stores a handoff's ``value`` as JSON (digested into the keys of the stages that read it);
a stage writes it from its model (:meth:`StageOutput.handoff`) and a later stage reads it back validated
(:meth:`~factory.pipeline.stages.base.StageContext.read`), so a renamed field or a record edited by hand is
one clear error, not a ``KeyError`` three stages later. The JSON of every model equals what the stages
stored before they were typed, so runs started earlier keep their keys and resume.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from factory.pipeline.state import Handoff
from router.schema import RouterConfig


class StageOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stage: ClassVar[str]

    def handoff(self, files: dict[str, str] | None = None, info: dict[str, Any] | None = None) -> Handoff:
        return Handoff(value=self.model_dump(mode="json"), files=files or {}, info=info or {})


class RolloutsOutput(StageOutput):
    stage = "rollouts"
    trajectories: dict[str, str] = Field(default_factory=dict, description="target -> digest of its trajectories.jsonl")


class PlannedCapability(BaseModel):
    """One capability the build stage makes an env for."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    target: str


class AnalyzeOutput(StageOutput):
    stage = "analyze"
    plan: list[PlannedCapability]
    labels: str = Field("", description="digest of labels.jsonl")


class BuiltEnv(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gym_id: str
    version: int
    target: str
    source_sha256: str


class BuildOutput(StageOutput):
    stage = "build"
    envs: dict[str, BuiltEnv]


class TrainOutput(StageOutput):
    stage = "train"
    adapters: dict[str, str] = Field(description="capability -> digest of its adapter folder")
    paths: dict[str, str] = Field(default_factory=dict, description="capability -> adapter folder, as the run records paths")


class RouteOutput(StageOutput):
    stage = "route"
    menu: str = Field(description="digest of the menu (without its creation time)")
    router: RouterConfig


class EvalOutput(StageOutput):
    stage = "eval"
    pass_rates: dict[str, float | None]

