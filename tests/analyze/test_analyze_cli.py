"""``factory analyze`` through typer's CliRunner on a tiny app that registers the command."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from factory.analyze.importers import write_jsonl
from factory.cli.analyze import analyze_command, summary_table
from schemas.capability import CapabilityReport
from tests.analyze import tau2_fixtures as fx

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


@pytest.fixture(scope="module")
def offline_run(injected_jsonl: Path, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    return invoke(injected_jsonl, "--out", out, "--bootstrap", "200"), out


def test_offline_end_to_end_on_the_injected_set(offline_run, injected_cases):
    """Over a thousand trajectories end to end: files written, figures consistent, one honest run."""
    result, out = offline_run
    assert result.exit_code == 0, result.output
    report = CapabilityReport.model_validate_json((out / "capabilities.json").read_text())
    assert report.n_trajectories == len(injected_cases) and report.labeler == "offline"
    assert report.deterministic and report.runs == 1 and report.min_runs == 1  # no fake K-of-N
    assert report.bootstrap_unit == "task"  # every task appears in several variants
    by_name = {f.name: f for f in report.candidates}
    assert len(by_name) == 7 and "policy_application" not in by_name
    pv = by_name["precondition_verification"].stats
    assert pv.selected and pv.er_success > 0  # lucky unchecked successes: ER+ is not zero by construction
    assert pv.gap_ci.low <= pv.gap <= pv.gap_ci.high and pv.n_failure_labeled > 10
    for name in ("capabilities.json", "report.md", "coverage.png", "labels.jsonl", "trajectories.jsonl"):
        assert (out / name).stat().st_size > 0
    assert not (out / "selection_frequency.png").exists()  # no frequency chart for a labeler that cannot vary
    assert (out / "coverage.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (out / "report.md").read_text()
    assert "deterministic, so it labeled once" in markdown and "runs selected" not in markdown
    assert "| `precondition_verification` |" in markdown and "## Offline labeler rules" in markdown
    labels = [json.loads(line) for line in (out / "labels.jsonl").read_text().splitlines()]
    assert {l["run"] for l in labels} == {0} and len(labels) == 7 * report.n_trajectories
    first = json.loads((out / "trajectories.jsonl").read_text().splitlines()[0])
    assert first["id"].startswith("injected:") and first["source_file"].endswith("injected.jsonl")


def test_summary_is_readable_at_80_columns_and_in_pipes(offline_run):
    """No column is dropped or squeezed to nothing: every header and every row's figures are printed, at 80
    columns and when stdout is not a terminal (CliRunner captures it)."""
    result, out = offline_run
    report = CapabilityReport.model_validate_json((out / "capabilities.json").read_text())
    for text in (result.stdout, _render(out, 80)):
        for header in ("capability", "ER+", "ER−", "Δ", "cov", "n S/F", "sel."):
            assert header in text
        for finding in report.candidates:
            assert finding.name in text.replace("\n", "").replace(" ", "") or finding.name in text
            assert f"{finding.stats.n_success_labeled}/{finding.stats.n_failure_labeled}" in text
        assert max(len(line) for line in text.splitlines()) <= 80
    wide = _render(out, 140)
    assert "coverage [95% CI]" in wide and max(len(line) for line in wide.splitlines()) <= 140


def _render(out: Path, width: int) -> str:
    from factory.analyze.pipeline import AnalysisResult

    report = CapabilityReport.model_validate_json((out / "capabilities.json").read_text())
    console = Console(file=io.StringIO(), width=width, force_terminal=False)
    console.print(summary_table(AnalysisResult(report=report, matrix=None, labels=[], capabilities=[]), width))
    return console.file.getvalue()


def test_json_prints_only_the_report(injected_cases, tmp_path: Path):
    path = tmp_path / "few.jsonl"
    write_jsonl([c.trajectory for c in injected_cases[:60]], path)
    result = invoke(path, "--bootstrap", "0", "--out", tmp_path / "o", "--json")
    assert result.exit_code == 0, result.output
    report = CapabilityReport.model_validate(json.loads(result.stdout))
    assert report.runs == 1 and report.n_trajectories == 60
    explicit = CapabilityReport.model_validate_json(invoke(path, "--runs", "5", "--bootstrap", "0", "--out", tmp_path / "o", "--json").stdout)
    assert (explicit.runs, explicit.resamples, explicit.min_runs) == (1, 5, 4)  # labeled once; K = 4 of N = 5 task resamples select
    assert any("at least K = 4 of N = 5 resamples of the tasks" in n for n in explicit.notes)
    assert all(f.stats.total_runs == 5 and 4 <= f.stats.selected_runs for f in explicit.capabilities)


def test_empty_charts_explain_themselves(tmp_path: Path):
    """All successes: no failure to contrast, so the chart says so instead of drawing empty bars."""
    sims = [fx.simulation(str(i), 0, 1.0, fx.conversation(*fx.cancel_turns(fx.BUSINESS))) for i in range(3)]
    path = fx.write(tmp_path / "ok.json", fx.results(sims, [fx.task(str(i)) for i in range(3)]))
    result = invoke(path, "--out", tmp_path / "o", "--bootstrap", "0")
    assert result.exit_code == 0, result.output
    from factory.analyze.charts import empty_reason

    report = CapabilityReport.model_validate_json((tmp_path / "o" / "capabilities.json").read_text())
    assert empty_reason(report) == "No failures attributable to the agent: coverage and ER− are undefined."
    assert (tmp_path / "o" / "coverage.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{missing}"], "no such file"),
        (["{corrupt}"], "not valid JSON"),
        (["{nan_reward}"], "field reward_info.reward: nan is not a finite number; a reward must be between 0 and 1"),
        (["{good}", "--catalogue", "bogus"], "--catalogue 'bogus' is not one of: seed, only, off"),
        (["{good}", "--runs", "abc"], "--runs 'abc' is not an integer; it must be between 1 and 100"),
        (["{good}", "--runs", "0"], "--runs 0 is out of range: it must be between 1 and 100"),
        (["{good}", "--delta", "x1"], "--delta 'x1' is not a number; it must be between 0 and 1"),
        (["{good}", "--delta", "nan"], "--delta 'nan' is not a finite number; it must be between 0 and 1"),
        (["{good}", "--delta", "inf"], "--delta 'inf' is not a finite number; it must be between 0 and 1"),
        (["{good}", "--coverage", "1.5"], "--coverage 1.5 is out of range: it must be between 0 and 1"),
        (["{good}", "--coverage", "-nan"], "--coverage '-nan' is not a finite number; it must be between 0 and 1"),
        (["{good}", "--bootstrap", "-1"], "--bootstrap -1 is out of range: it must be between 0 and 100000"),
        (["{good}", "--batch-size", "51"], "--batch-size 51 is out of range: it must be between 1 and 50"),
        (["{good}", "--concurrency", "0"], "--concurrency 0 is out of range: it must be between 1 and 256"),
        (["{good}", "--seed", "-3"], "--seed -3 is out of range: it must be between 0 and 4.29497e+09"),
        (["{good}", "--min-runs", "11"], "--min-runs 11 exceeds --runs 1"),
        (["{good}", "--runs", "5", "--min-runs", "6"], "--min-runs 6 exceeds --runs 5"),
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
    sim = fx.simulation("0", 0, 1.0, fx.conversation(("user", "hi")))
    nan_reward = tmp_path / "nan.json"
    nan_reward.write_text(json.dumps(fx.results([sim], [fx.task("0")])).replace('"reward": 1.0,', '"reward": NaN,', 1))
    paths = {"missing": tmp_path / "missing.json", "corrupt": corrupt, "good": good, "nan_reward": nan_reward}
    result = invoke(*[a.format(**paths) for a in args], "--out", tmp_path / "o")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_help_has_examples():
    result = runner.invoke(app, ["analyze", "--help"])
    assert result.exit_code == 0 and "Examples:" in result.output and "--include-unattributable" in result.output


def test_without_matplotlib_the_report_is_still_written(tmp_path: Path, injected_cases, monkeypatch: pytest.MonkeyPatch):
    import factory.analyze.report as report_module

    monkeypatch.setattr(report_module, "_have_matplotlib", lambda: False)
    path = tmp_path / "few.jsonl"
    write_jsonl([c.trajectory for c in injected_cases[:20]], path)
    result = invoke(path, "--out", tmp_path / "o")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "report.md").exists() and not list((tmp_path / "o").glob("*.png"))
    assert "matplotlib is not installed" in result.stderr


def test_pipeline_reports_progress(injected_cases):
    from factory.analyze.pipeline import AnalyzeConfig, analyze

    seen: list[tuple[str, int, int]] = []
    trajectories = [c.trajectory for c in injected_cases[:30]]
    result = analyze(trajectories, AnalyzeConfig(runs=2, bootstrap=0), progress=lambda *a: seen.append(a))
    assert seen[-1] == ("labeling", 30, 30)
    assert len(result.labels) == 1 and result.report.deterministic  # labeled once; K of N over 2 task resamples
    assert (result.report.runs, result.report.resamples, result.report.min_runs) == (1, 2, 2)
