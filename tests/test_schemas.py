"""Boundary models: JSON Schema export, meta-schema checking of tool parameters, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from pydantic import ValidationError

from schemas import EXPORTED_MODELS, Message, ToolSchema, export_json_schemas, strip_free_text
from schemas.messages import FunctionCall


def test_every_boundary_model_exports_a_valid_json_schema(tmp_path: Path) -> None:
    written = export_json_schemas(tmp_path)
    assert len(written) == len(EXPORTED_MODELS)
    for path in written:
        schema = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)


def test_tool_schema_rejects_invalid_parameters_with_location() -> None:
    bad = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "nonsense"}}}}}
    with pytest.raises(ValidationError, match="not a valid JSON Schema at properties/x/type"):
        ToolSchema.model_validate(bad)
    with pytest.raises(ValidationError, match="must describe an object"):
        ToolSchema.model_validate({"function": {"name": "f", "parameters": {"type": "string"}}})


def test_strip_free_text_keeps_property_names_that_look_like_keywords() -> None:
    schema = {"type": "object", "description": "d", "title": "T",
              "properties": {"title": {"type": "string", "description": "a title"}, "description": {"type": "string"}}}
    assert strip_free_text(schema) == {"type": "object", "properties": {"title": {"type": "string"}, "description": {"type": "string"}}}


def test_function_call_arguments_errors() -> None:
    assert FunctionCall(name="f", arguments='{"a": 1}').parsed_arguments() == {"a": 1}
    with pytest.raises(ValueError, match="not valid JSON"):
        FunctionCall(name="f", arguments="{a").parsed_arguments()
    with pytest.raises(ValueError, match="must be a JSON object"):
        FunctionCall(name="f", arguments="[1]").parsed_arguments()
    assert Message(role="tool", content="ok", tool_call_id="c1", name="f").role == "tool"
