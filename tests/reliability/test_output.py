"""Issue 14 item 6 (the reliability part): summaries readable at 80 columns, messages printed as themselves,
one-line errors with no leading blank line, honest listings and reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from factory.build import BuildResult
from factory.cli.build import _build_summary
from factory.testing.llm_server import ScriptedLLMServer
from tests.reliability.conftest import one_line, put
from tests.reliability.test_bounds import capability_report

NAMES = ["precondition_verification", "multi_step_task_completion", "structured_data_reasoning"]


def result(name: str, registered: bool, generator: str = "blueprint") -> BuildResult:
    return BuildResult(
        capability=name, target="tau2-airline", gym_id=f"trace/{name}-v12" if registered else None, version=12 if registered else None,
        new_version=True, generator=generator, model="openai:gpt-4.1" if generator == "llm" else None, attempts=3,
        registered=registered, validation="passed" if registered else "failed", sandbox="bwrap", registry="/r", seconds=9.25,
        report=None, cost_usd=0.0123,
    )


@pytest.mark.parametrize("width", [80, 60, 160])
def test_build_all_summary_keeps_every_column_whole_at_any_width(width: int) -> None:
    results = [result(NAMES[0], True), result(NAMES[1], False, "llm"), result(NAMES[2], True, "llm")]
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115 - rendered, then read back
    console.print(_build_summary(results))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    for column in ("capability", "generator", "attempts", "checks", "time", "cost", "gym id"):
        assert column in text, column
    for value in (*NAMES, f"trace/{NAMES[0]}-v12", f"trace/{NAMES[2]}-v12", "not registered", "$0.0123", "9.2 s"):
        assert value in text, (value, text)


def test_build_all_through_the_cli_at_80_columns(tmp_path: Path, factory_main) -> None:
    path = tmp_path / "capabilities.json"
    path.write_text(capability_report("refund_rule_lookup", "telepathy_for_agents").model_dump_json())
    outcome = factory_main("build", "--all", "--report", str(path))
    assert outcome.code == 1
    table = [line for line in outcome.stdout.splitlines() if line[:1] in "┏┃┡│├└┌" or line.startswith("factory build")]
    assert table and all(len(line) <= 80 for line in table)
    for value in ("refund_rule_lookup", "telepathy_for_agents", "gym id", "not registered", "generator", "cost"):
        assert value in outcome.stdout


def test_errors_are_one_line_with_no_blank_line_before(factory_main) -> None:
    outcome = factory_main("build", "-c", "telepathy")
    assert outcome.code == 2 and outcome.stderr.startswith("error: no built-in blueprint for 'telepathy'")
    one_line(outcome.stderr)


def test_text_from_outside_is_printed_as_itself(tmp_path: Path, factory_main) -> None:
    """Markup in a manifest (target, description) and in an error prints literally; control characters go."""
    root = tmp_path / "registry"
    manifest, _ = put(root, description="[bold red]not markup[/] \x1b]52;c;bad\x07 {1,63}")
    outcome = factory_main("envs", "show", "tiny_cancel", "--registry", str(root))
    assert outcome.code == 0 and "[bold red]not markup[/]" in outcome.stdout and "\x1b" not in outcome.stdout
    missing = factory_main("envs", "show", "[red]x[/]", "--registry", str(root))
    assert "'[red]x[/]' is not a capability name" in one_line(missing.stderr)


def test_envs_remove_json_and_list_on_a_file(tmp_path: Path, factory_main) -> None:
    root = tmp_path / "registry"
    put(root)
    put(root, "other_env")
    removed = factory_main("envs", "remove", "trace/tiny_cancel-v0", "--registry", str(root), "--json")
    assert removed.code == 0
    assert json.loads(removed.stdout) == {"removed": ["trace/tiny_cancel-v0"], "capability": "tiny_cancel", "registry": str(root)}
    (tmp_path / "a_file").write_text("")
    for command in (["envs", "list"], ["envs", "show", "tiny_cancel"], ["envs", "remove", "tiny_cancel"]):  # a sound name: the registry is what is wrong
        outcome = factory_main(*command, "--registry", str(tmp_path / "a_file"))
        line = one_line(outcome.stderr)
        assert outcome.code == 2 and "is a file, not a folder" in line and "--registry" in line


def test_a_tampered_env_is_listed_as_tampered_not_passed(tmp_path: Path, factory_main) -> None:
    root = tmp_path / "registry"
    put(root, validation="passed")
    put(root, "other_env", validation="passed")
    env_file = root / "tiny_cancel" / "v0" / "env.py"
    env_file.write_text(env_file.read_text() + "# injected\n")
    listed = factory_main("envs", "list", "--registry", str(root))
    assert listed.code == 0
    row = next(line for line in listed.stdout.splitlines() if "tiny_cancel" in line or "tampered" in line)
    assert "tampered" in listed.stdout and "passed" in listed.stdout  # other_env still passed
    assert "fails its content-hash check" in listed.stderr and row
    data = {e["gym_id"]: e["status"] for e in json.loads(factory_main("envs", "list", "--json", "--registry", str(root)).stdout)}
    assert data == {"trace/tiny_cancel-v0": "tampered", "trace/other_env-v0": "ok"}


def test_replies_without_code_are_reported_as_such_not_as_a_failed_gate(tmp_path: Path, factory_main, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    monkeypatch.setenv("TRACE_FACTORY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TRACE_FACTORY_BUILDS", str(tmp_path / "builds"))
    with ScriptedLLMServer(lambda request: "I'd rather describe the env than write it.") as server:
        outcome = factory_main("build", "-c", "tiny_cancel", "--description", "Cancels refundable bookings.", "--target",
                               "tau2-airline", "--llm", "openai:gpt-4.1", "--llm-base-url", server.openai_base_url,
                               "--max-attempts", "2", "--json")
    data = json.loads(outcome.stdout)
    assert outcome.code == 1 and data["registered"] is False
    assert data["validation"] == "not run" and data["report"] is None
    assert data["error"].startswith("none of the 2 replies held env code (last: your reply contains no Python code block")
    assert "validation gate" not in data["error"]
