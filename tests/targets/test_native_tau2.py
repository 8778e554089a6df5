"""The native τ²-bench backend, when τ²-bench is importable (Python >= 3.12, installed from its repository).

It checks the adapter against τ² itself and against the MCP servers: the same tool schemas as τ² exports,
the same gold end states as τ²'s evaluator, the same tool outputs over MCP as natively, and the same DB
verdict as τ²'s own ``EnvironmentEvaluator`` on our trajectories. Skipped where ``tau2`` is not importable.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("tau2", reason="τ²-bench is not importable (needs Python >= 3.12 and a local install)")

from env_registry.targets.catalog import open_backend, resolve_target, spec_tasks  # noqa: E402
from env_registry.targets.runner import GoldCache, TargetRunner  # noqa: E402
from factory.rollout.policies import EmptyPolicy, GoldPolicy  # noqa: E402
from tests.targets.helpers import requires_servers, shared_json  # noqa: E402

SAMPLE = {"airline": ["0", "1", "2", "5", "7", "10", "23", "44"], "retail": ["0", "2", "3", "5", "35", "64", "105"]}


@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_native_tools_and_tasks_are_tau2s(domain: str) -> None:
    spec = resolve_target(f"tau2-{domain}", backend="native")
    backend = open_backend(spec)
    try:
        assert backend.tools() == shared_json(domain, "tools.json")
        assert backend.describe().startswith("tau2 1.0.1")
    finally:
        backend.close()
    assert [t.version for t in spec_tasks(spec)] == [t.version for t in spec_tasks(resolve_target(f"tau2-{domain}", backend="mcp"))]


def _episode(runner: TargetRunner, policy: Any, task_id: str) -> dict[str, Any]:
    first = runner.reset(0, task_id=task_id)
    act = policy.start(runner.task, first.info["tools"], 0)
    while True:
        result = runner.step(act(list(runner.messages)))
        if result.terminated or result.truncated:
            return result.info


def _tau2_db_reward(domain: str, task_id: str, messages: list[dict[str, Any]]) -> float:
    """τ²'s own EnvironmentEvaluator on our trajectory, translated to τ² messages."""
    from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage, UserMessage
    from tau2.evaluator.evaluator_env import EnvironmentEvaluator
    from tau2.registry import registry

    task = next(t for t in registry.get_tasks_loader(domain)() if t.id == task_id)
    trajectory = []
    for m in messages[1:]:
        if m["role"] == "assistant":
            calls = [ToolCall(id=c["id"], name=c["function"]["name"], arguments=json.loads(c["function"]["arguments"])) for c in m.get("tool_calls") or []]
            trajectory.append(AssistantMessage(role="assistant", content=m["content"], tool_calls=calls or None))
        elif m["role"] == "tool":
            trajectory.append(ToolMessage(id=m["tool_call_id"], role="tool", content=m["content"]))
        else:
            trajectory.append(UserMessage(role="user", content=m["content"]))
    info = EnvironmentEvaluator.calculate_reward(environment_constructor=registry.get_env_constructor(domain), task=task, full_trajectory=trajectory)
    return float(info.reward)


@requires_servers
@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_native_and_mcp_agree_with_tau2(domain: str) -> None:
    native = TargetRunner(resolve_target(f"tau2-{domain}", backend="native"), gold_cache=GoldCache())
    mcp = TargetRunner(resolve_target(f"tau2-{domain}", backend="mcp"), gold_cache=GoldCache())
    expected = shared_json(domain, "gold_hashes.json")["tasks"]["tasks.json"]
    empty_verdicts = set()
    try:
        for task_id in SAMPLE[domain]:
            ours = {name: _episode(runner, GoldPolicy(), task_id) for name, runner in (("native", native), ("mcp", mcp))}
            for info in ours.values():
                assert info["reward_detail"]["db"]["gold_hash"] == expected[task_id]["final_hash"] == info["reward_detail"]["db"]["final_hash"]
                assert info["reward_detail"]["gates"]["DB"] == 1.0
            tool_outputs = {name: [m["content"] for m in info["messages"] if m["role"] == "tool"] for name, info in ours.items()}
            assert tool_outputs["native"] == tool_outputs["mcp"], task_id  # MCP outputs are τ²'s, byte for byte
            assert _tau2_db_reward(domain, task_id, ours["native"]["messages"]) == 1.0
            empty = _episode(native, EmptyPolicy(), task_id)
            assert _tau2_db_reward(domain, task_id, empty["messages"]) == empty["reward_detail"]["gates"]["DB"]
            empty_verdicts.add(empty["reward_detail"]["gates"]["DB"])
        assert empty_verdicts == {0.0, 1.0}  # the sample has tasks that need writes and tasks that do not
    finally:
        native.close()
        mcp.close()
