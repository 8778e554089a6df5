"""The CLI's promises to operators (issue 23): every --help states the exit codes and names only shipped envs,
``factory --version``, and progress that reads in a log (one timestamped line per step, with an ETA)."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from factory.cli import app
from factory.cli.exits import CONTRACT
from tests.conftest import REPO_ROOT
from tests.ops.conftest import run_factory


def command_paths() -> list[list[str]]:
    """Every command and subcommand the app has, found by walking it (a new command is walked too)."""
    import typer.main

    root = typer.main.get_command(app)
    paths = []

    def walk(command, prefix: list[str]) -> None:  # noqa: ANN001
        subcommands = getattr(command, "commands", None)
        if not subcommands:
            paths.append(prefix)
            return
        for name, sub in subcommands.items():
            walk(sub, [*prefix, name])

    walk(root, [])
    return paths


ALL = command_paths()


def test_the_walk_finds_every_command() -> None:
    assert ["rollout"] in ALL and ["envs", "remove"] in ALL and ["sandbox", "exec"] in ALL and ["serve"] in ALL and len(ALL) == 16


@pytest.mark.parametrize("path", ALL, ids=[" ".join(p) for p in ALL])
def test_every_help_states_the_exit_codes_and_names_only_shipped_envs(path: list[str]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert " ".join(CONTRACT.split()) in text
    shipped = {p.stem for p in (REPO_ROOT / "factory" / "blueprints").glob("*.py")} | {p.stem for p in (REPO_ROOT / "examples" / "envs").glob("*.py")}
    named = set(re.findall(r"trace/([a-z][a-z0-9_]+)-v\d", text)) | set(re.findall(r"factory train ([a-z][a-z0-9_]+)(?=\s)", text))
    assert named <= shipped, named - shipped
    assert "wifi_on" not in text  # a test env, not shipped


def test_version_prints_the_package_version() -> None:
    import tomllib

    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    ran = run_factory("--version", timeout=60)
    assert ran.code == 0 and ran.stdout.strip() == f"factory (trace-factory) {version}" and ran.stderr == ""


def test_the_top_level_help_states_the_contract() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and " ".join(CONTRACT.split()) in " ".join(result.output.split())


def test_line_progress_reads_in_a_log(monkeypatch: pytest.MonkeyPatch) -> None:
    from factory.cli import progress

    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    out = io.StringIO()
    bar = progress.progress_display(Console(file=out, width=80, force_terminal=False), interval=10.0)
    assert isinstance(bar, progress.LineProgress)  # not a terminal: lines, not a live bar
    with bar:
        task = bar.add_task("episodes", total=10, passed=0)
        for step in range(1, 11):
            now[0] += 3.0
            bar.update(task, completed=step, passed=step // 2)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # at most one line per 10 s (after 12 s and 24 s), and the last step
    assert re.match(r"^\[\d\d:\d\d:\d\d\] episodes: 4/10 \(40%\), 12 s elapsed, about 18 s left; passed 2$", lines[0]), lines[0]
    assert lines[-1].split("] ", 1)[1] == "episodes: 10/10 (100%), 30 s elapsed, done; passed 5"
    resumed = progress.LineProgress(Console(file=io.StringIO(), width=80), interval=0)
    task = resumed.add_task("train", total=10, completed=6)  # resumed at 6: the rate counts only this process's steps
    now[0] += 5.0
    resumed.update(task, completed=7)
    assert "about 15 s left" in resumed.line(resumed.tasks[task], now[0])


def test_a_live_bar_is_kept_for_terminals_and_quiet_stays_quiet() -> None:
    from rich.progress import Progress

    from factory.cli.progress import progress_display

    assert isinstance(progress_display(Console(file=io.StringIO(), force_terminal=True)), Progress)
    quiet = progress_display(Console(file=io.StringIO(), force_terminal=False), enabled=False)
    assert isinstance(quiet, Progress) and quiet.disable


def test_a_long_command_piped_says_where_it_is(tmp_path: Path) -> None:
    """`factory validate` in a log: a line per check, counting up to the total, with what was checked."""
    from tests.conftest import TEST_ENVS

    started = time.monotonic()
    from factory.validation.checks import SANDBOX_CHECKS

    env = TEST_ENVS.parent / "gate" / "envs" / "tiny_checked.py"
    ran = run_factory("validate", str(env), "--sandbox", "bwrap", "--set", "solvability_seeds=10",
                      "--set", "necessity_seeds=10", "--set", "diversity_seeds=20", "--set", "fuzz_examples=5",
                      TRACE_FACTORY_PROGRESS_SECONDS="0")  # fmt: skip
    assert ran.code == 0, ran.stderr[-1500:]
    total = 1 + len(SANDBOX_CHECKS)  # static, then every sandbox check
    steps = re.findall(rf"^\[\d\d:\d\d:\d\d\] validating \S+tiny_checked.py: (\d+)/{total} .*; (\w+) (pass|FAIL|skipped)$", ran.stderr, re.M)
    assert [int(s[0]) for s in steps] == list(range(1, total + 1)) and steps[0][1] == "static" and steps[-1][1] == "budget"
    assert time.monotonic() - started < 300
