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
