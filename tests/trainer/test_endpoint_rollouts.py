"""Any OpenAI-compatible endpoint as the rollout policy, no training: the real openai SDK against the
scripted server, the real env in its sandbox, trajectories in the project's schema."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from factory.cli import app
from factory.testing.llm_server import RecordedRequest, ScriptedLLMServer, ScriptedReply
from schemas.trajectory import Trajectory

CALL = '<tool_call>{"name": "set_wifi_status", "arguments": {"on": true}}</tool_call>'


def agent(request: RecordedRequest) -> str:
    """Chats first; once the user insists, makes the call the reward needs."""
    return CALL if "Please just switch the wifi on." in request.prompt_text() else "Sure, one moment."


def test_collect_only_writes_trajectories(tmp_path: Path, wifi_env: str) -> None:
    out = tmp_path / "rollouts.jsonl"
    with ScriptedLLMServer(agent) as server:
        result = CliRunner().invoke(app, [
            "train", wifi_env, "--model", "served-model", "--base-url", server.openai_base_url, "--collect-only", str(out),
            "--set", "grpo.groups=2", "--set", "grpo.group_size=2", "--sandbox", "bwrap", "--json",
        ])
        assert result.exit_code == 0, result.output
        sent = [r.body for r in server.requests]
    summary = json.loads(result.stdout)["envs"][wifi_env]
    assert summary == {"episodes": 4, "mean_reward": 1.0, "success_rate": 1.0, "infrastructure_errors": 0}
    records = [Trajectory.model_validate_json(line) for line in out.read_text().splitlines()]
    assert [r.metadata["trial"] for r in records] == [0, 1, 0, 1] and [r.metadata["seed"] for r in records] == [0, 0, 1, 1]
    for record in records:
        assert record.reward == 1.0 and record.success and record.target == "toolsandbox"
        assert record.metadata["termination_reason"] == "agent_stop" and len(record.metadata["task_version"]) == 64
        assert [m.role for m in record.messages] == ["system", "user", "assistant", "user", "assistant", "tool"]
    assert len(sent) == 8 and all(body["model"] == "served-model" and body["temperature"] == 1.0 for body in sent)
    assert "set_wifi_status" in json.dumps(sent[0]["messages"])  # the tools reach the endpoint's model


def test_failing_endpoint_is_an_infrastructure_error_not_a_zero_reward(tmp_path: Path, wifi_env: str) -> None:
    out = tmp_path / "rollouts.jsonl"
    with ScriptedLLMServer(lambda request: ScriptedReply(status=400, text="bad request")) as server:
        result = CliRunner().invoke(app, [
            "train", wifi_env, "--model", "served-model", "--base-url", server.openai_base_url, "--collect-only", str(out),
            "--set", "grpo.groups=1", "--set", "grpo.group_size=2", "--sandbox", "bwrap",
        ])
    assert result.exit_code == 0, result.output
    assert "mean reward -, success -, infrastructure errors 2" in " ".join(result.output.split())
    records = [Trajectory.model_validate_json(line) for line in out.read_text().splitlines()]
    assert all(r.metadata["termination_reason"] == "infrastructure_error" and "400" in r.metadata["infrastructure_error"] for r in records)
