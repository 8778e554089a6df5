"""``factory route`` end to end: real analyze labels, real sandboxed demos, the tiny model, PEFT adapters."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factory.cli import app
from router.evaluate import RoutingEvalReport
from tests.router.helpers import CAPABILITIES

runner = CliRunner()
SHARED_TAU2 = Path(__file__).resolve().parents[2].parent / "shared" / "targets" / "tau2"
KINDS = {"write_before_check": 6, "repeat_failed_call": 6, "drop_confirmed_write": 6, "invented_id": 3, "success": 8}


def invoke(*args: object, env: dict[str, str] | None = None):
    return runner.invoke(app, ["route", *map(str, args)], env=env)


@pytest.fixture(scope="module")
def analysis(tmp_path_factory) -> tuple[Path, Path]:
    """A few injected τ² trajectories, analysed offline by `factory analyze` (labels.jsonl, capabilities.json)."""
    if not SHARED_TAU2.is_dir():
        pytest.skip(f"real τ² data not found at {SHARED_TAU2}")
    from factory.analyze.importers import write_jsonl
    from factory.testing.injection import Tau2Domain, build_cases

    cases = build_cases([Tau2Domain.load(SHARED_TAU2 / "airline")], seed=0)
    picked, left = [], dict(KINDS)
    for case in cases:
        if left.get(case.kind, 0) > 0:
            picked.append(case.trajectory)
            left[case.kind] -= 1
    root = tmp_path_factory.mktemp("analysis")
    write_jsonl(picked, root / "traj.jsonl")
    out = root / "out"
    result = runner.invoke(app, ["analyze", str(root / "traj.jsonl"), "--tasks", str(SHARED_TAU2 / "airline" / "tasks.json"), "--out", str(out), "--bootstrap", "0", "--runs", "1"])
    assert result.exit_code == 0, result.output
    return out, root / "traj.jsonl"


@pytest.fixture(scope="module")
def saved_menu(menu, tmp_path_factory) -> Path:
    """The session's menu on disk: commands given --menu need no registry and no sandbox."""
    from router.menu import save_menu

    return save_menu(menu, tmp_path_factory.mktemp("menu") / "menu.json")


def independent_expectations(labels: Path, trajectories: Path) -> dict[str, set[str]]:
    """Failed trajectory -> menu capabilities labeled LACKING, read straight from the files (analyze names a
    trajectory ``<file stem>:<id>``, so ids stay unique across files)."""
    records = [json.loads(line) for line in trajectories.read_text().splitlines()]
    failed = {f"{trajectories.stem}:{r['id']}" for r in records if not r["success"]}
    lacking: dict[str, set[str]] = {tid: set() for tid in failed}
    for line in labels.read_text().splitlines():
        record = json.loads(line)
        if record["trajectory_id"] in failed and record["label"] == "LACKING" and record["capability"] in CAPABILITIES:
            lacking[record["trajectory_id"]].add(record["capability"])
    return lacking


@pytest.mark.slow
def test_eval_measures_accuracy_against_analyze_labels(analysis, adapter_dirs, gated_registry, tmp_path) -> None:
    out_dir, trajectories = analysis
    adapters = adapter_dirs[next(iter(adapter_dirs))].parent
    result = invoke("--eval", out_dir, "--trajectories", trajectories, "--adapters", adapters, "--registry", gated_registry,
                    "--capabilities", out_dir / "capabilities.json", "--out", tmp_path / "eval", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    report = RoutingEvalReport.model_validate_json(result.stdout)
    expected = {tid: wanted for tid, wanted in independent_expectations(out_dir / "labels.jsonl", trajectories).items() if wanted}
    assert report.n_evaluated == len(expected) >= 12 and report.n_failures == 21
    assert report.n_unlabeled == report.n_failures - len(expected)  # an invented id lacks no menu capability
    assert {i.trajectory_id: set(i.expected) for i in report.items} == expected
    assert report.correct == sum(i.correct for i in report.items) == sum(i.choice in expected[i.trajectory_id] for i in report.items)
    assert report.accuracy == pytest.approx(report.correct / report.n_evaluated)
    counts = report.confusion.counts
    assert sum(map(sum, counts)) == report.n_evaluated
    assert sum(counts[k][k] for k in range(len(counts))) == report.correct
    assert [o.chosen for o in report.options] == [sum(row[k] for row in counts) for k in range(len(counts))]
    assert report.confusion.keys[-1] == "(base)" and set(report.confusion.keys[:-1]) == set(CAPABILITIES)
    assert (tmp_path / "eval" / "confusion.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert RoutingEvalReport.model_validate_json((tmp_path / "eval" / "routing_eval.json").read_text()) == report


@pytest.mark.slow
def test_eval_table_reads_at_80_columns(analysis, adapter_dirs, saved_menu, tmp_path) -> None:
    out_dir, trajectories = analysis
    adapters = adapter_dirs[next(iter(adapter_dirs))].parent
    result = invoke("--eval", out_dir, "--trajectories", trajectories, "--adapters", adapters, "--menu", saved_menu,
                    "--out", tmp_path / "eval", "--debias", env={"COLUMNS": "80"})  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "routing accuracy:" in result.stdout and "confusion" in result.stdout and "per option" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


@pytest.mark.slow
def test_route_tasks_json_and_a_saved_menu(analysis, adapter_dirs, gated_registry, tmp_path) -> None:
    _, trajectories = analysis
    adapters = adapter_dirs[next(iter(adapter_dirs))].parent
    first = invoke(trajectories, "--text", "Cancel my flight", "--adapters", adapters, "--registry", gated_registry,
                   "--limit", 3, "--save-menu", tmp_path / "menu.json", "--decisions", tmp_path / "d.jsonl", "--json")  # fmt: skip
    assert first.exit_code == 0, first.output
    decisions = json.loads(first.stdout)
    assert len(decisions) == 3 and all(abs(sum(d["probabilities"].values()) - 1) < 1e-9 for d in decisions)
    assert len((tmp_path / "d.jsonl").read_text().splitlines()) == 3
    empty = tmp_path / "empty-registry"  # the saved menu needs no registry and no sandbox
    again = invoke(trajectories, "--adapters", adapters, "--registry", empty, "--menu", tmp_path / "menu.json", "--limit", 3, "--json")
    assert again.exit_code == 0, again.output
    assert [d["probabilities"] for d in json.loads(again.stdout)] == [d["probabilities"] for d in decisions]
    table = invoke("--text", "Cancel my flight", "--adapters", adapters, "--menu", tmp_path / "menu.json", env={"COLUMNS": "80"})
    assert table.exit_code == 0 and "routing decisions" in table.stdout and "text-1" in table.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "nothing to route"),
        (["--text", "x", "--adapter", "precondition_verification=/nonexistent"], "not a PEFT adapter folder"),
        (["--text", "x", "--unlabeled", "maybe"], "--unlabeled 'maybe'"),
        (["--eval", "/nonexistent/labels.jsonl", "--model", "x"], "no such file"),
        (["--text", "x", "--menu", "/nonexistent/menu.json", "--model", "x"], "menu /nonexistent/menu.json: no such file"),
    ],
)
def test_bad_input_is_one_line(args: list[str], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_multi_token_label_is_named_on_the_command_line(adapter_dirs, saved_menu) -> None:
    adapters = adapter_dirs[next(iter(adapter_dirs))].parent
    result = invoke("--text", "x", "--adapters", adapters, "--menu", saved_menu, "--alphabet", "A,B,C,Dee")
    assert result.exit_code == 2 and "routing label 'Dee' is 2 tokens" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_help_has_examples() -> None:
    result = runner.invoke(app, ["route", "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0 and "Examples" in result.output and "--eval" in result.output
    assert os.environ.get("TRACE_FACTORY_REGISTRY")  # the suite's isolated registry, never the user's
