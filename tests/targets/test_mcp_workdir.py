"""MCP servers that keep their world in files: a declared workdir is put back before every episode, an undeclared
one that changes is refused in one line, and declared environment variables reach the stdio server.

The server under test (notes_file_server.py) writes its notes to notes.json or an SQLite notes.db in the
folder it runs in, so a process restart (the default reset of a stdio server without a reset tool) resets nothing.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from env_registry.targets.env import TargetEnv
from env_registry.targets.errors import TargetConfigError
from env_registry.targets.mcp import MCPServerSpec, parse_server
from tests.targets.helpers import tool_call

SCRIPT = str(Path(__file__).with_name("notes_file_server.py"))
TASK = {
    "id": "note",
    "user_scenario": {"instructions": "You want a note that says milk."},
    "evaluation_criteria": {"actions": [{"name": "add_note", "arguments": {"text": "milk"}}], "reward_basis": ["ACTION"]},
}


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([TASK]))
    return path


def notes(env: TargetEnv) -> str:
    text = env.step(tool_call("list_notes"))[0]
    match = re.search(r"notes=(\[.*?\])", text)
    assert match, text
    return match.group(1)


@pytest.mark.parametrize("storage", ["json", "sqlite"])
def test_a_declared_workdir_is_restored_before_every_episode_and_on_close(tasks: Path, tmp_path: Path, storage: str) -> None:
    workdir = tmp_path / "world"
    workdir.mkdir()
    if storage == "json":
        (workdir / "notes.json").write_text(json.dumps(["seeded"]))
    before = {p.name: p.read_bytes() for p in workdir.iterdir()}
    fresh = "['seeded']" if storage == "json" else "[]"
    command = [sys.executable, SCRIPT] + (["--sqlite"] if storage == "sqlite" else [])
    env = TargetEnv("mcp", tasks=tasks, server=MCPServerSpec(command=command, workdir=str(workdir)))
    try:
        for _ in range(2):
            env.reset(seed=0)
            assert env.unwrapped.runner.backend.reset_mode == "workdir"
            assert notes(env) == fresh
            env.step(tool_call("add_note", text="milk"))
            assert "milk" in notes(env)
    finally:
        env.close()
    assert {p.name: p.read_bytes() for p in workdir.iterdir()} == before


def test_a_server_that_writes_where_it_runs_is_refused_a_second_episode(
    tasks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = TargetEnv("mcp", tasks=tasks, server=f"{sys.executable} {SCRIPT}")
    shared = TargetEnv("mcp", tasks=tasks, server=f"{sys.executable} {SCRIPT}", allow_shared_state=True)
    try:
        env.reset(seed=0)
        assert env.unwrapped.runner.backend.reset_mode == "restart"
        env.step(tool_call("add_note", text="milk"))
        with pytest.raises(TargetConfigError, match=r"changed files .*\(notes\.json\).*workdir") as refused:
            env.reset(seed=0)
        assert "\n" not in str(refused.value)
        shared.reset(seed=0)
        shared.step(tool_call("add_note", text="eggs"))
        shared.reset(seed=0)  # allowed, and it really is the world the last episode left
        assert notes(shared) == "['milk', 'eggs']"
    finally:
        env.close()
        shared.close()


def test_a_server_that_keeps_nothing_in_files_is_still_restarted_freely(tasks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = TargetEnv("mcp", tasks=tasks, server=f"{sys.executable} {SCRIPT}")
    try:
        for _ in range(3):
            env.reset(seed=0)
            assert "owner=" in env.step(tool_call("whoami"))[0]
    finally:
        env.close()


def test_declared_environment_variables_reach_the_stdio_server(tasks: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTES_OWNER", "bo")
    owners = []
    for server in (
        f"NOTES_OWNER=ana {sys.executable} {SCRIPT}",
        MCPServerSpec(command=[sys.executable, SCRIPT], inherit_env=["NOTES_OWNER"]),
        MCPServerSpec(command=[sys.executable, SCRIPT]),
    ):
        env = TargetEnv("mcp", tasks=tasks, server=server)
        try:
            env.reset(seed=0)
            owners.append(re.search(r"owner=(\w+)", env.step(tool_call("whoami"))[0]).group(1))
        finally:
            env.close()
    assert owners == ["ana", "bo", "unset"]  # undeclared, the SDK passes only HOME, PATH and the like
    monkeypatch.delenv("NOTES_OWNER")
    env = TargetEnv("mcp", tasks=tasks, server=MCPServerSpec(command=[sys.executable, SCRIPT], inherit_env=["NOTES_OWNER"]))
    try:
        with pytest.raises(TargetConfigError, match="needs the environment variable.*NOTES_OWNER"):
            env.reset(seed=0)
    finally:
        env.close()


def test_bad_declarations_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(TargetConfigError, match="names no command"):
        parse_server("A=1 B=2")
    assert parse_server("A=1 python s.py --x=1").model_dump(include={"command", "env"}) == {"command": ["python", "s.py", "--x=1"], "env": {"A": "1"}}
    with pytest.raises(ValueError, match="workdir needs a stdio server"):
        MCPServerSpec(url="http://127.0.0.1:1/mcp", workdir=str(tmp_path))


def test_factory_rollout_takes_the_workdir_and_inherited_variables(tasks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's --workdir and --inherit-env reach the server: two episodes on one server folder both start
    from the folder as it was, and the folder is left as found; without --workdir the second is refused."""
    from typer.testing import CliRunner

    from factory.cli import app

    workdir = tmp_path / "world"
    workdir.mkdir()
    (workdir / "notes.json").write_text(json.dumps(["seeded"]))
    before = (workdir / "notes.json").read_bytes()
    monkeypatch.setenv("NOTES_OWNER", "ada")
    whoami = {"id": "owner", "user_scenario": {"instructions": "Whose notes are these?"},
              "evaluation_criteria": {"actions": [{"name": "whoami", "arguments": {}}], "reward_basis": ["ACTION"]}}  # fmt: skip
    tasks.write_text(json.dumps([TASK, whoami]))
    common = ["rollout", "--target", "mcp", "--server", f"{sys.executable} {SCRIPT}", "--tasks", str(tasks),
              "--policy", "scripted:gold", "--trials", "2", "--concurrency", "1", "--json"]  # fmt: skip
    runner = CliRunner()
    declared = runner.invoke(app, [*common, "--workdir", str(workdir), "--inherit-env", "NOTES_OWNER", "--out", str(tmp_path / "a")])
    assert declared.exit_code == 0, declared.output
    summary = json.loads(declared.stdout)
    assert summary["episodes"] == 4 and summary["errors"] == 0 and summary["passed"] == 4, summary
    assert "owner=ada" in (tmp_path / "a" / "trajectories.jsonl").read_text()  # the variable reached the server
    assert (workdir / "notes.json").read_bytes() == before
    monkeypatch.chdir(workdir)
    undeclared = runner.invoke(app, [*common, "--out", str(tmp_path / "b")])
    assert undeclared.exit_code != 0 and "--workdir DIR" in undeclared.output, undeclared.output
