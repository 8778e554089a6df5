"""Issue 14 item 5 (the reliability part): every setting and number read from the user or a file is bounded,
and a refusal names the allowed range or value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas.capability import CapabilityFinding, CapabilityReport, CapabilityStats
from tests.reliability.conftest import one_line


def capability_report(*names: str, **changes: object) -> CapabilityReport:
    findings = [
        CapabilityFinding(name=name, description=f"{name} described", stats=CapabilityStats(
            capability=name, er_success=0.1, er_failure=0.6, gap=0.5, coverage=0.4))
        for name in names
    ]
    report = CapabilityReport(labeler="offline", runs=1, delta=0.1, coverage_threshold=0.1, min_runs=1, n_trajectories=10,
                              n_successes=5, n_failures=5, capabilities=findings, targets=["tau2-airline"])
    return report.model_copy(update=changes)


@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_a_capabilities_report_of_an_unknown_schema_version_is_refused(tmp_path: Path, factory_main, version: object) -> None:
    path = tmp_path / "capabilities.json"
    data = json.loads(capability_report("telepathy").model_dump_json())
    data["schema_version"] = version
    path.write_text(json.dumps(data))
    result = factory_main("build", "--all", "--report", str(path))
    line = one_line(result.stderr)
    assert result.code == 2 and f"schema_version {version!r} is not supported (allowed: 1)" in line


def test_a_current_capabilities_report_is_read(tmp_path: Path, factory_main) -> None:
    path = tmp_path / "capabilities.json"
    path.write_text(capability_report("telepathy").model_dump_json())
    result = factory_main("build", "--all", "--report", str(path), "--json")
    assert result.code == 1  # read, then the one capability has no blueprint: listed as not built
    assert "no built-in blueprint for 'telepathy'" in json.loads(result.stdout)[0]["error"]


@pytest.mark.parametrize(
    "args, words",
    [
        (["build", "-c", "x", "--max-attempts", "0"], "(allowed: 1 <= value <= 50)"),
        (["build", "-c", "x", "--max-attempts", "51"], "less than or equal to 50 (allowed: 1 <= value <= 50)"),
        (["build", "-c", "x", "--llm-timeout", "nan"], "--llm-timeout"),
        (["build", "-c", "x", "--llm-timeout", "inf"], "(allowed: 1 <= value <= 3600)"),
        (["build", "-c", "x", "--llm-timeout", "0.5"], "(allowed: 1 <= value <= 3600)"),
        (["validate", "x.py", "--calibrate-seeds", "0"], "(allowed: 1 <= value <= 10000)"),
        (["validate", "x.py", "--calibrate-k", "1"], "(allowed: 2 <= value <= 256)"),
        (["envs", "show", "x", "--version", "-1"], "(allowed: 0 <= value)"),
        (["envs", "remove", "x", "--version", "-1"], "(allowed: 0 <= value)"),
        (["build", "-c", "x", "--set", "grpo_seeds=0"], "(allowed: 1 to 1000)"),
        (["build", "-c", "x", "--set", "grpo_group_size=1"], "(allowed: 2 to 256)"),
        (["build", "-c", "x", "--set", "grpo_seeds=many"], "--set grpo_seeds=many: Input should be a valid integer"),
    ],
)
def test_out_of_range_settings_name_the_range(factory_main, args: list[str], words: str) -> None:
    result = factory_main(*args)
    line = one_line(result.stderr)
    assert result.code == 2 and words in line, line


def test_a_capability_name_from_the_user_is_checked_and_its_pattern_printed_whole(factory_main, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pydantic pattern has brackets; it prints as itself, not as Rich markup (issue 14 item 6)."""
    from factory.testing.llm_server import ScriptedLLMServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    with ScriptedLLMServer([]) as server:
        result = factory_main("build", "-c", "Bad Name", "--description", "x", "--target", "tau2-airline",
                              "--llm", "openai:gpt-4.1", "--llm-base-url", server.openai_base_url)
        assert server.requests == []
    line = one_line(result.stderr)
    assert result.code == 2 and "'^[a-z][a-z0-9_]{1,63}$'" in line
