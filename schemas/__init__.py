"""Pydantic models for every boundary of trace-factory, each exportable as JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from schemas.capability import (
    Capability,
    CapabilityFinding,
    CapabilityLabel,
    CapabilityOverlap,
    CapabilityReport,
    CapabilityStats,
    Interval,
    RunFigures,
    TrajectoryLabel,
)
from schemas.manifest import EnvManifest, Provenance
from schemas.messages import AssistantTurn, FunctionCall, Message, ToolCall
from schemas.target import TargetProfile, ToolMeta
from schemas.tools import FunctionSpec, ToolSchema, interface_diff, strip_free_text
from schemas.trajectory import Trajectory

EXPORTED_MODELS: tuple[type[BaseModel], ...] = (
    ToolSchema,
    Message,
    ToolCall,
    AssistantTurn,
    Trajectory,
    Capability,
    TrajectoryLabel,
    CapabilityStats,
    CapabilityReport,
    TargetProfile,
    EnvManifest,
)


def export_json_schemas(directory: Path) -> list[Path]:
    """Write ``<Model>.schema.json`` for every boundary model, for non-Python consumers."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for model in EXPORTED_MODELS:
        path = directory / f"{model.__name__}.schema.json"
        path.write_text(json.dumps(model.model_json_schema(), indent=2) + "\n")
        written.append(path)
    return written


__all__ = [
    "AssistantTurn",
    "Capability",
    "CapabilityLabel",
    "CapabilityFinding",
    "CapabilityOverlap",
    "CapabilityReport",
    "CapabilityStats",
    "EXPORTED_MODELS",
    "EnvManifest",
    "FunctionCall",
    "FunctionSpec",
    "Interval",
    "Message",
    "Provenance",
    "RunFigures",
    "TargetProfile",
    "ToolCall",
    "ToolMeta",
    "ToolSchema",
    "Trajectory",
    "TrajectoryLabel",
    "export_json_schemas",
    "interface_diff",
    "strip_free_text",
]
