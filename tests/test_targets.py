"""Shipped target profiles must reproduce the real benchmarks' tool interfaces exactly, in our own words.

The real tool files live in ``shared/targets`` beside the repository root (see its README for provenance).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from schemas.target import TargetProfile
from schemas.targets import builtin_target_ids, load_target, profile_from_tools_file
from schemas.tools import interface_diff, strip_free_text

SHARED_TARGETS = Path(__file__).resolve().parents[1].parent / "shared" / "targets"

if not SHARED_TARGETS.is_dir():
    pytest.skip(
        f"real target data not found at {SHARED_TARGETS} (the shared/targets folder beside the repo root)",
        allow_module_level=True,
    )

# profile id -> (family, domain, real tools file, real tool-meta file or None, real policy file or None)
TARGETS: dict[str, tuple[str, str, str, str | None, str | None]] = {
    "tau2-airline": ("tau2", "airline", "tau2/airline/tools.json", "tau2/airline/tool_meta.json", "tau2/airline/policy.md"),
    "tau2-retail": ("tau2", "retail", "tau2/retail/tools.json", "tau2/retail/tool_meta.json", "tau2/retail/policy.md"),
    "toolsandbox": ("toolsandbox", "phone", "toolsandbox/tools.json", None, None),
}
TARGET_IDS = list(TARGETS)
MIN_COPIED_LEN = 25
"""Descriptions this long or longer must not be copied verbatim from the real tools file."""


def real_tools(target_id: str) -> list[dict[str, Any]]:
    return json.loads((SHARED_TARGETS / TARGETS[target_id][2]).read_text(encoding="utf-8"))


def prose(node: Any, keyword: str = "description", pointer: str = "", in_properties: bool = False) -> dict[str, str]:
    """Every prose ``keyword`` string in a tool dict, keyed by where it sits (property names are not keywords)."""
    found: dict[str, str] = {}
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{pointer}/{key}"
            if not in_properties and key == keyword and isinstance(value, str):
                found[where] = value
            else:
                nested = key in ("properties", "$defs", "definitions") and not in_properties
                found.update(prose(value, keyword, where, nested))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found.update(prose(item, keyword, f"{pointer}[{index}]"))
    return found


@pytest.mark.parametrize("target_id", TARGET_IDS)
def test_profile_metadata(target_id: str) -> None:
    family, domain, *_ = TARGETS[target_id]
    profile = load_target(target_id)
    assert profile.id == target_id
    assert profile.family == family
    assert profile.domain == domain
    assert profile.policy.strip()
    assert "{message}" in profile.error_style
    assert profile.source.get("repository") and re.fullmatch(r"[0-9a-f]{40}", profile.source.get("commit", ""))
    assert profile.source.get("note") == "descriptions and policy rewritten"
    assert set(profile.tool_meta) == set(profile.tool_names), "every tool needs a ToolMeta entry"


@pytest.mark.parametrize("target_id", TARGET_IDS)
def test_tool_names_equal_real_in_order(target_id: str) -> None:
    assert load_target(target_id).tool_names == [tool["function"]["name"] for tool in real_tools(target_id)]


@pytest.mark.parametrize("target_id", TARGET_IDS)
def test_interfaces_equal_real(target_id: str) -> None:
    profile = load_target(target_id)
    for real in real_tools(target_id):
        name = real["function"]["name"]
        actual = profile.tool(name).interface()
        expected = strip_free_text(real)
        assert actual == expected, f"{target_id}/{name}: " + "; ".join(interface_diff(actual, expected))


@pytest.mark.parametrize("target_id", TARGET_IDS)
def test_descriptions_are_own_words(target_id: str) -> None:
    profile = load_target(target_id)
    copied = []
    compared = 0
    for real in real_tools(target_id):
        name = real["function"]["name"]
        ours = prose(profile.tool(name).model_dump(mode="json", exclude_none=True))
        theirs = prose(real)
        assert set(ours) == set(theirs), f"{target_id}/{name}: descriptions sit at different places"
        for where, text in theirs.items():
            compared += 1
            if ours[where].strip() == text.strip() and len(text.strip()) > MIN_COPIED_LEN:
                copied.append(f"{name}{where}: {text!r}")
    assert compared > 0
    assert not copied, f"{len(copied)} description(s) copied verbatim from the real tools file: {copied}"


@pytest.mark.parametrize("target_id", TARGET_IDS)
def test_profiles_carry_no_titles(target_id: str) -> None:
    for tool in load_target(target_id).tools:
        titles = prose(tool.model_dump(mode="json", exclude_none=True), "title")
        assert not titles, f"{tool.name}: title keys should be dropped: {titles}"


@pytest.mark.parametrize("target_id", [t for t, spec in TARGETS.items() if spec[4]])
def test_policy_is_summarised_not_copied(target_id: str) -> None:
    original = (SHARED_TARGETS / TARGETS[target_id][4]).read_text(encoding="utf-8")
    policy = load_target(target_id).policy
    assert 0.4 * len(original) <= len(policy) <= 0.7 * len(original)
    sentences = [s.strip(" -*#") for s in re.split(r"(?<=[.!?])\s+|\n+", original)]
    copied = [s for s in sentences if len(s) > 40 and s in policy]
    assert not copied, f"sentences copied from policy.md: {copied}"


@pytest.mark.parametrize("target_id", [t for t, spec in TARGETS.items() if spec[3]])
def test_tau2_tool_meta_matches_real(target_id: str) -> None:
    real_meta = json.loads((SHARED_TARGETS / TARGETS[target_id][3]).read_text(encoding="utf-8"))["tools"]
    profile = load_target(target_id)
    assert set(profile.tool_meta) == set(real_meta)
    for name, meta in real_meta.items():
        assert profile.tool_meta[name].kind == meta["tool_type"], name
        assert profile.tool_meta[name].mutates_state == meta["mutates_state"], name


def test_toolsandbox_tool_meta_follows_semantics() -> None:
    meta = load_target("toolsandbox").tool_meta
    for name, entry in meta.items():
        if name.startswith(("set_", "add_", "modify_", "remove_", "send_")):
            assert entry.kind == "write" and entry.mutates_state, name
        elif name.startswith(("search_", "get_")):
            assert entry.kind == "read" and not entry.mutates_state, name
        else:
            assert entry.kind == "generic" and not entry.mutates_state, name
    assert len(meta) == 34


@pytest.mark.parametrize("target_id", TARGET_IDS)
def test_parameters_pass_json_schema_metaschema(target_id: str) -> None:
    profile = load_target(target_id)  # ToolSchema checks every parameters block on load
    for tool in profile.tools:
        params = tool.function.parameters
        jsonschema.validators.validator_for(params, default=jsonschema.Draft202012Validator).check_schema(params)


def test_target_profile_json_schema_exports() -> None:
    schema = TargetProfile.model_json_schema()
    assert {"id", "tools", "tool_meta", "policy"} <= set(schema["properties"])
    json.dumps(schema)


def test_builtin_ids_and_unknown_target() -> None:
    assert set(TARGET_IDS) <= set(builtin_target_ids())
    with pytest.raises(KeyError) as excinfo:
        load_target("nope")
    message = str(excinfo.value)
    assert "nope" in message
    for target_id in TARGET_IDS:
        assert target_id in message


def test_profile_from_real_airline_tools_file_matches_shipped() -> None:
    path = SHARED_TARGETS / "tau2/airline/tools.json"
    built = profile_from_tools_file(path, target_id="airline-from-file", family="tau2")
    shipped = load_target("tau2-airline")
    assert built.tool_names == shipped.tool_names
    for tool in built.tools:
        actual, expected = tool.interface(), shipped.tool(tool.name).interface()
        assert actual == expected, f"{tool.name}: " + "; ".join(interface_diff(actual, expected))


def test_profile_from_corrupt_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken_tools.json"
    path.write_text('[{"type": "function", "function": {', encoding="utf-8")
    with pytest.raises(ValueError) as excinfo:
        profile_from_tools_file(path)
    assert str(path) in str(excinfo.value)


def test_profile_from_file_with_invalid_json_schema_names_the_tool(tmp_path: Path) -> None:
    path = tmp_path / "bad_schema.json"
    bad = {"name": "x", "parameters": {"type": "object", "properties": {"x": {"type": "nonsense"}}}}
    path.write_text(json.dumps([{"type": "function", "function": bad}]), encoding="utf-8")
    with pytest.raises(ValueError) as excinfo:
        profile_from_tools_file(path)
    assert "tool #0" in str(excinfo.value)
    assert str(path) in str(excinfo.value)


def test_duplicate_tool_names_fail_validation() -> None:
    tool = load_target("tau2-airline").tools[0].model_dump(mode="json", exclude_none=True)
    with pytest.raises(ValidationError, match="repeated"):
        TargetProfile(id="dupes", title="duplicate tools", tools=[tool, tool])

