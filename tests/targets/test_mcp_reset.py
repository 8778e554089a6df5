"""Any MCP server: each episode starts in a fresh world or is refused, and task checks read the world's state.

The server under test (shopping_list_server.py) keeps one shopping list in memory and, unless told to, has
no reset tool: exactly the kind of server whose next episode used to start where the last one ended.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from env_registry.targets.env import TargetEnv
from env_registry.targets.errors import TargetConfigError
from env_registry.targets.mcp import MCPServerSpec
from tests.targets.helpers import http_mcp_server, tool_call

SCRIPT = Path(__file__).with_name("shopping_list_server.py")
STDIO = f"{sys.executable} {SCRIPT}"
TASK = {
    "id": "milk",
    "user_scenario": {"instructions": "You want milk on the shopping list."},
    "evaluation_criteria": {"actions": [{"name": "add_item", "arguments": {"item": "milk"}}], "reward_basis": ["ACTION", "DB"]},
}


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([TASK]))
    return path


def listed(env: TargetEnv) -> tuple[str, str]:
    """(items, pid) as the server reports them."""
    text = env.step(tool_call("list_items"))[0]
    match = re.search(r"items=(\[.*\]) pid=(\d+)", text)
    assert match, text
    return match.group(1), match.group(2)


def test_a_stdio_server_without_reset_is_restarted_per_episode(tasks: Path) -> None:
    env = TargetEnv("mcp", tasks=tasks, server=STDIO)
    try:
        env.reset(seed=0)
        assert env.unwrapped.runner.backend.reset_mode == "restart"
        env.step(tool_call("add_item", item="milk"))
        items, first_pid = listed(env)
        assert items == "['milk']"
        env.reset(seed=0)
        items, second_pid = listed(env)
        assert items == "[]" and second_pid != first_pid
    finally:
        env.close()


def test_a_reset_tool_is_called_per_episode_and_hidden(tasks: Path) -> None:
    env = TargetEnv("mcp", tasks=tasks, server=f"{STDIO} --reset-tool", reset_tool="reset_world")
    try:
        _, info = env.reset(seed=0)
        assert env.unwrapped.runner.backend.reset_mode == "tool"
        assert sorted(t["function"]["name"] for t in info["tools"]) == ["add_item", "list_items", "remove_item"]
        env.step(tool_call("add_item", item="milk"))
        _, first_pid = listed(env)
        env.reset(seed=0)
        assert listed(env) == ("[]", first_pid)  # same process, fresh world
    finally:
        env.close()


@pytest.fixture
def http_server() -> Iterator[str]:
    with http_mcp_server(SCRIPT, "--http") as url:
        yield url


def test_a_server_that_cannot_be_reset_is_refused_a_second_episode(tasks: Path, http_server: str) -> None:
    env = TargetEnv("mcp", tasks=tasks, server=http_server)
    other = TargetEnv("mcp", tasks=tasks, server=http_server)  # the same world behind another connection
    shared = TargetEnv("mcp", tasks=tasks, server=http_server, allow_shared_state=True)
    try:
        env.reset(seed=0)
        assert env.unwrapped.runner.backend.reset_mode == "none"
        env.step(tool_call("add_item", item="milk"))
        for again in (env, other):
            with pytest.raises(TargetConfigError, match="--allow-shared-state"):
                again.reset(seed=0)
        shared.reset(seed=0)  # allowed, and it really is the last episode's world
        assert listed(shared)[0] == "['milk']"
    finally:
        for each in (env, other, shared):
            each.close()
    with pytest.raises(ValueError, match="cannot be restarted"):
        MCPServerSpec(url=http_server, reset="restart")


@pytest.mark.parametrize("state_tool", [None, "dump_state"])
def test_task_checks_read_the_worlds_state_where_the_server_exposes_it(tasks: Path, state_tool: str | None) -> None:
    """An agent that adds the item and takes it off again made the gold call: only a check on the state fails it."""
    env = TargetEnv("mcp", tasks=tasks, server=f"{STDIO} --state-tool", state_tool=state_tool)
    try:
        results = []
        for turns in ([("add_item", "milk")], [("add_item", "milk"), ("remove_item", "milk")]):
            _, info = env.reset(seed=0)
            assert ("dump_state" in {t["function"]["name"] for t in info["tools"]}) is (state_tool is None)
            for name, item in turns:
                env.step(tool_call(name, item=item))
            _, reward, _, _, info = env.step("###STOP###")
            results.append((reward, info["reward_detail"]))
    finally:
        env.close()
    (kept, kept_detail), (undone, undone_detail) = results
    if state_tool is None:
        assert kept == undone == 1.0 and "state tool" in undone_detail["not_judged"]["DB"]
    else:
        assert kept == 1.0 and kept_detail["gates"] == {"ACTION": 1.0, "DB": 1.0} and kept_detail["fully_judged"]
        assert undone == 0.0 and undone_detail["gates"] == {"ACTION": 1.0, "DB": 0.0}


def test_factory_rollout_refuses_a_second_episode_on_an_unresettable_server(tasks: Path, http_server: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from factory.cli import app

    common = ["rollout", "--target", "mcp", "--server", http_server, "--tasks", str(tasks), "--policy", "scripted:gold",
              "--trials", "2", "--concurrency", "1", "--json"]
    refused = CliRunner().invoke(app, [*common, "--out", str(tmp_path / "refused")])
    assert refused.exit_code == 2 and "--allow-shared-state" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    shared = CliRunner().invoke(app, [*common, "--out", str(tmp_path / "shared"), "--allow-shared-state"])
    assert shared.exit_code == 0, shared.output
    summary = json.loads(shared.stdout)
    assert summary["episodes"] == 2 and summary["passed"] == 2  # the call-only check cannot tell the second world was not fresh
