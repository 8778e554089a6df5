"""Tool schemas in the OpenAI function-calling format.

A target's tool interface is the contract a synthetic env must reproduce exactly, so the schema model
checks its parameters against JSON Schema's own meta-schema and offers a comparison that ignores only
free text (descriptions and titles).
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, field_validator

FREE_TEXT_KEYS = frozenset({"description", "title", "examples"})
"""JSON Schema keys whose values are prose: they may be reworded without changing the interface."""


class FunctionSpec(BaseModel):
    """The `function` object of an OpenAI tool: a name, a description and a JSON Schema for arguments."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None

    @field_validator("parameters")
    @classmethod
    def _parameters_are_json_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        validator_cls = jsonschema.validators.validator_for(value, default=jsonschema.Draft202012Validator)
        try:
            validator_cls.check_schema(value)
        except jsonschema.SchemaError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
            raise ValueError(f"parameters is not a valid JSON Schema at {where}: {exc.message}") from None
        if value.get("type", "object") != "object":
            raise ValueError("parameters must describe an object (type: object), as OpenAI tools require")
        return value


class ToolSchema(BaseModel):
    """One tool as an OpenAI-format dict: ``{"type": "function", "function": {...}}``."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["function"] = "function"
    function: FunctionSpec

    @property
    def name(self) -> str:
        return self.function.name

    def interface(self) -> dict[str, Any]:
        """The schema with all free text removed: what must match the target exactly."""
        return strip_free_text(self.model_dump(mode="json", exclude_none=True))


def strip_free_text(schema: Any) -> Any:
    """Return a copy of a (tool or JSON) schema without prose keys, so two wordings compare equal.

    Property names are data, not keywords: a parameter literally called ``title`` is kept.
    """

    def walk(node: Any, in_properties: bool) -> Any:
        if isinstance(node, dict):
            out: dict[str, Any] = {}
            for key, value in node.items():
                if not in_properties and key in FREE_TEXT_KEYS and isinstance(value, (str, list)):
                    continue
                out[key] = walk(value, in_properties=(key in ("properties", "$defs", "definitions") and not in_properties))
            return out
        if isinstance(node, list):
            return [walk(item, False) for item in node]
        return copy.deepcopy(node)

    return walk(schema, False)


def interface_diff(actual: dict[str, Any], expected: dict[str, Any], path: str = "") -> list[str]:
    """Human-readable differences between two free-text-stripped schemas (empty when identical)."""
    diffs: list[str] = []
    if isinstance(actual, dict) and isinstance(expected, dict):
        for key in sorted(set(actual) | set(expected)):
            where = f"{path}/{key}"
            if key not in actual:
                diffs.append(f"{where}: missing (expected {expected[key]!r})")
            elif key not in expected:
                diffs.append(f"{where}: unexpected {actual[key]!r}")
            else:
                diffs.extend(interface_diff(actual[key], expected[key], where))
    elif isinstance(actual, list) and isinstance(expected, list) and len(actual) == len(expected):
        for index, (a, e) in enumerate(zip(actual, expected)):
            diffs.extend(interface_diff(a, e, f"{path}[{index}]"))
    elif actual != expected:
        diffs.append(f"{path or '(root)'}: {actual!r} != expected {expected!r}")
    return diffs
