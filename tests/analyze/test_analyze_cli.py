"""``factory analyze`` through typer's CliRunner on a tiny app that registers the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from factory.cli.analyze import analyze_command
from factory.analyze.importers import write_jsonl
from schemas.capability import CapabilityReport

app = typer.Typer()
app.command("analyze")(analyze_command)


@app.callback()
def _root() -> None:
    """test app"""


runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, ["analyze", *map(str, args)])


@pytest.fixture(scope="module")
def injected_jsonl(injected_cases, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("traj") / "injected.jsonl"
    write_jsonl([c.trajectory for c in injected_cases], path)
    return path


def test_offline_end_to_end_on_the_injected_set(injected_jsonl: Path, task_files, tmp_path: Path):
    """Over a thousand trajectories end to end: files written, figures consistent, selection sensible."""
    out = tmp_path / "out"
    result = invoke(injected_jsonl, "--tasks", task_files[0], "--tasks", task_files[1], "--out", out, "--bootstrap", "200")
    assert result.exit_code == 0, result.output
    report = CapabilityReport.model_validate_json((out / "capabilities.json").read_text())
    assert report.n_trajectories > 1000 and report.labeler == "offline" and report.runs == 10 and report.min_runs == 8
    by_name = {f.name: f for f in report.candidates}
    assert len(by_name) == 7
    # the two injections with the most failures clear δ = 0.2 and ρ = 0.1 in every run
    assert {f.name for f in report.capabilities} == {"precondition_verification", "permission_error_recovery"}
    pv = by_name["precondition_verification"].stats
    assert pv.selected_runs == 10 and pv.er_success == 0.0 and pv.gap_ci.low <= pv.gap <= pv.gap_ci.high
    assert pv.coverage == pytest.approx(232 / report.n_failures)
    assert all(i.endswith(("ineligible_write", "write_before_check")) for i in by_name["precondition_verification"].example_failure_ids)
    for name in ("capabilities.json", "report.md", "selection_frequency.png", "coverage.png", "labels.jsonl"):
        assert (out / name).stat().st_size > 0
    assert (out / "coverage.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (out / "report.md").read_text()
    assert "## Offline labeler rules" in markdown and "| `precondition_verification` |" in markdown
    assert "Capabilities (offline" in result.stdout and "selected" in result.stdout


def test_json_prints_only_the_report(injected_jsonl: Path, task_files, tmp_path: Path):
    result = invoke(injected_jsonl, "--tasks", task_files[1], "--runs", "3", "--min-runs", "2", "--bootstrap", "0", "--out", tmp_path, "--json")
    assert result.exit_code == 0, result.output
    report = CapabilityReport.model_validate(json.loads(result.stdout))
    assert report.runs == 3 and report.min_runs == 2
    assert any("gold actions found for" in note for note in report.notes)  # airline trajectories have no gold here


def test_no_gold_runs_with_a_note(tmp_path: Path, injected_cases):
    path = tmp_path / "few.jsonl"
    write_jsonl([c.trajectory for c in injected_cases[:40]], path)
    result = invoke(path, "--runs", "1", "--out", tmp_path / "o", "--json")
    assert result.exit_code == 0, result.output
    report = CapabilityReport.model_validate_json(result.stdout)
    assert any("pass --tasks" in note for note in report.notes)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{missing}"], "no such file"),
        (["{corrupt}"], "not valid JSON"),
        (["{good}", "--catalogue", "bogus"], "--catalogue 'bogus' is not one of: seed, only, off"),
        (["{good}", "--runs", "abc"], "--runs 'abc' is not an integer"),
        (["{good}", "--runs", "0"], "--runs 0 is out of range"),
        (["{good}", "--delta", "x1"], "--delta 'x1' is not a number"),
        (["{good}", "--coverage", "1.5"], "--coverage 1.5 is out of range"),
        (["{good}", "--min-runs", "11"], "--min-runs 11 exceeds --runs 10"),
        (["{good}", "--tasks", "{missing}"], "no such tasks file"),
        (["{good}", "--tasks", "{corrupt}"], "not valid JSON"),
        (["{good}", "--llm", "nosuch:model"], "unknown LLM provider 'nosuch'"),
        (["{good}", "--llm", "openai:gpt-4.1"], "OPENAI_API_KEY is not set"),
        (["{good}", "--llm", "vllm:m", "--llm-base-url", "ftp://x"], "must start with http://"),
        (["{good}", "--catalogue", "off"], "--catalogue off needs an LLM"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, injected_cases, args, message):
    good = tmp_path / "good.jsonl"
    write_jsonl([c.trajectory for c in injected_cases[:5]], good)
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"simulations": [}')
    paths = {"missing": tmp_path / "missing.json", "corrupt": corrupt, "good": good}
    result = invoke(*[a.format(**paths) for a in args], "--out", tmp_path / "o")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_help_has_examples():
    result = runner.invoke(app, ["analyze", "--help"])
    assert result.exit_code == 0 and "Examples:" in result.output and "--tasks" in result.output


def test_without_matplotlib_the_report_is_still_written(tmp_path: Path, injected_cases, monkeypatch: pytest.MonkeyPatch):
    import factory.analyze.report as report_module

    monkeypatch.setattr(report_module, "_have_matplotlib", lambda: False)
    path = tmp_path / "few.jsonl"
    write_jsonl([c.trajectory for c in injected_cases[:20]], path)
    result = invoke(path, "--runs", "1", "--out", tmp_path / "o")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "report.md").exists() and not list((tmp_path / "o").glob("*.png"))
    assert "matplotlib is not installed" in result.stderr


def test_pipeline_reports_progress(injected_cases):
    from factory.analyze.pipeline import AnalyzeConfig, analyze

    seen: list[tuple[str, int, int]] = []
    trajectories = [c.trajectory for c in injected_cases[:30]]
    result = analyze(trajectories, AnalyzeConfig(runs=2, bootstrap=0), progress=lambda *a: seen.append(a))
    assert seen[-1] == ("labeling", 30, 30)
    assert len(result.labels) == 2 and result.report.min_runs == 2
