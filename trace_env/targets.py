"""The shipped target profiles as plain JSON: what env code needs of a target, without pydantic.

The host validates the same files into :class:`schemas.target.TargetProfile`; inside the sandbox the SDK
and the kits only need a tool's schema, the policy text and the error style, so they read the JSON.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

_DATA = "target_data"


def builtin_target_ids() -> list[str]:
    """Ids of the profiles shipped in ``trace_env/target_data/*.json``."""
    folder = resources.files("trace_env").joinpath(_DATA)
    return sorted(entry.name.removesuffix(".json") for entry in folder.iterdir() if entry.name.endswith(".json"))


@lru_cache(maxsize=None)
def profile_text(target_id: str) -> str:
    """The profile file's text; unknown ids name the shipped ones."""
    known = builtin_target_ids()
    if target_id not in known:
        raise KeyError(f"unknown target {target_id!r}; shipped targets: {', '.join(known)} (or pass a tools JSON file)")
    return resources.files("trace_env").joinpath(_DATA, f"{target_id}.json").read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def _profile(target_id: str) -> dict[str, Any]:
    return json.loads(profile_text(target_id))


def tool_schema(target_id: str, name: str) -> dict[str, Any]:
    """One tool's OpenAI-format schema, a fresh copy each call (callers may edit it)."""
    for tool in _profile(target_id)["tools"]:
        if tool["function"]["name"] == name:
            return json.loads(json.dumps(tool))
    names = ", ".join(t["function"]["name"] for t in _profile(target_id)["tools"])
    raise KeyError(f"target {target_id!r} has no tool {name!r}; it has: {names}")


def tool_names(target_id: str) -> list[str]:
    return [t["function"]["name"] for t in _profile(target_id)["tools"]]


def policy(target_id: str) -> str:
    return str(_profile(target_id).get("policy", ""))


def error_style(target_id: str) -> str:
    return str(_profile(target_id).get("error_style") or "Error: {message}")
