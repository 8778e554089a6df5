"""Shipped target profiles and a loader for OpenAI-format tools files."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from schemas.errors import validation_message
from schemas.target import TargetProfile, ToolMeta
from schemas.tools import ToolSchema
from trace_env.targets import builtin_target_ids, profile_text

__all__ = ["builtin_target_ids", "load_target", "profile_from_tools_file"]


@lru_cache(maxsize=None)
def load_target(target_id: str) -> TargetProfile:
    """Load a shipped profile by id, e.g. ``tau2-airline``, validated; unknown ids name the known ones.

    The files ship with ``trace_env`` (the sandbox reads them as plain JSON); here they become models.
    """
    return TargetProfile.model_validate_json(profile_text(target_id))


def profile_from_tools_file(
    path: Path, target_id: str | None = None, policy: str = "", family: str = "custom"
) -> TargetProfile:
    """Build a profile from an OpenAI-format tools JSON file (a list of ``{type, function}`` objects).

    Errors name the file and the offending tool, so a user can fix the file rather than read a traceback.
    """
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if isinstance(raw, dict) and "tools" in raw:
        raw = raw["tools"]
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a JSON list of OpenAI tools, got {type(raw).__name__}")
    tools = []
    for index, item in enumerate(raw):
        if isinstance(item, dict) and "function" not in item and "name" in item:
            item = {"type": "function", "function": item}
        try:
            tools.append(ToolSchema.model_validate(item))
        except ValidationError as exc:
            raise ValueError(f"{path}: tool #{index} is not an OpenAI tool schema: {validation_message(exc)}") from None
    meta = {tool.name: ToolMeta() for tool in tools}
    return TargetProfile(
        id=target_id or Path(path).stem.lower().replace(".", "-"),
        title=f"Tools from {Path(path).name}",
        family=family,  # type: ignore[arg-type]
        tools=tools,
        tool_meta=meta,
        policy=policy,
        source={"tools_file": str(path)},
    )
