"""The six stages, in the order they run: each module is one stage (see ``base`` for the contract)."""

from __future__ import annotations

from factory.pipeline.stages.analyze import AnalyzeStage
from factory.pipeline.stages.base import Stage, StageContext, StageError
from factory.pipeline.stages.build import BuildStage
from factory.pipeline.stages.evaluate import EvalStage
from factory.pipeline.stages.rollouts import RolloutsStage
from factory.pipeline.stages.route import RouteStage
from factory.pipeline.stages.train import TrainStage

STAGES: list[Stage] = [RolloutsStage(), AnalyzeStage(), BuildStage(), TrainStage(), RouteStage(), EvalStage()]
STAGE_NAMES = [stage.name for stage in STAGES]

__all__ = ["STAGES", "STAGE_NAMES", "Stage", "StageContext", "StageError"]
