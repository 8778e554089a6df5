"""Policies on a live target: an API LLM (scripted server behind the real SDK) and a local HF model with a PEFT adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factory.cli import app
from factory.rollout.engine import Rollout, RolloutConfig
from env_registry.conversation import text_dialogue as text_protocol
from factory.rollout.store import RolloutStore
from factory.testing.llm_server import RecordedRequest, ScriptedLLMServer, ScriptedReply
from tests.targets.helpers import requires_servers

CALL = '<tool_call>{"name": "get_reservation_details", "arguments": {"reservation_id": "Q69X3R"}}</tool_call>'


def test_text_protocol_renders_calls_and_results_for_text_apis() -> None:
    messages = [
        {"role": "system", "content": "POLICY"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "1", "name": "f", "content": "R1"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "2", "name": "g", "content": "R2"},
    ]
    tools = [{"type": "function", "function": {"name": "f", "description": "F", "parameters": {"type": "object"}}}]
    system, dialogue = text_protocol(messages, tools)
    assert system.startswith("POLICY") and json.dumps(tools[0]) in system and "<tool_call>" in system
    assert [m["role"] for m in dialogue] == ["user", "assistant", "user", "assistant", "user"]
    assert dialogue[1]["content"] == 'Let me look.\n<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'
    assert dialogue[2]["content"] == '<tool_response name="f">\nR1\n</tool_response>'


@requires_servers
def test_an_api_llm_policy_calls_tools_and_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def agent(request: RecordedRequest) -> str:
        last = request.body["messages"][-1]["content"]
        return "All set. ###STOP###" if last.startswith("<tool_response") else f"Let me check. {CALL}"

    with ScriptedLLMServer(agent) as server:
        monkeypatch.setenv("TRACE_LLM_BASE_URL", server.openai_base_url)
        config = RolloutConfig(target="tau2-airline", backend="mcp", task_ids=["1"], policy="compat:agent-model", out=tmp_path / "run")
        summary = Rollout(config).run()
        requests = list(server.requests)
    assert (summary.passed, summary.errors) == (1, 0)
    (trajectory,) = RolloutStore.load(tmp_path / "run")
    assert trajectory.metadata["termination_reason"] == "agent_stop" and trajectory.metadata["policy"] == "compat:agent-model"
    roles = [m.role for m in trajectory.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert trajectory.messages[2].tool_calls[0].function.name == "get_reservation_details"
    assert '"reservation_id": "Q69X3R"' in trajectory.messages[3].content
    system = requests[0].body["messages"][0]["content"]
    assert "Airline Agent Policy" in system and '"name": "book_reservation"' in system and "state_key" not in system
    assert requests[1].body["messages"][-1]["content"].startswith('<tool_response name="get_reservation_details">')


@requires_servers
def test_a_failing_policy_is_an_agent_error_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedLLMServer([ScriptedReply(status=400, text="context too long")]) as server:
        monkeypatch.setenv("TRACE_LLM_BASE_URL", server.openai_base_url)
        config = RolloutConfig(target="tau2-retail", backend="mcp", task_ids=["0"], policy="compat:agent-model", out=tmp_path / "run")
        summary = Rollout(config).run()
    assert (summary.episodes, summary.errors, summary.error_kinds, summary.pass_rate) == (1, 1, {"agent": 1}, None)
    (trajectory,) = RolloutStore.load(tmp_path / "run")
    assert trajectory.metadata["termination_reason"] == "agent_error" and "context too long" in trajectory.metadata["agent_error"]


@pytest.fixture(scope="module")
def tiny_with_adapter(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    from trainer.tiny_model import ensure_tiny_model

    model_path = ensure_tiny_model()
    model = AutoModelForCausalLM.from_pretrained(model_path)
    config = peft.LoraConfig(r=4, lora_alpha=32, target_modules=["q_proj", "v_proj"], init_lora_weights=False)  # nonzero: it must show
    adapter = tmp_path_factory.mktemp("adapter") / "lora"
    peft.get_peft_model(model, config).save_pretrained(adapter)
    return model_path, adapter


@requires_servers
def test_a_local_hf_model_with_an_adapter_runs_episodes(tmp_path: Path, tiny_with_adapter: tuple[Path, Path]) -> None:
    model_path, adapter = tiny_with_adapter
    firsts = {}
    for name, spec in (("base", f"hf:{model_path}"), ("adapted", f"hf:{model_path}@{adapter}")):
        out = tmp_path / name
        args = ["rollout", "--target", "tau2-airline", "--backend", "mcp", "--task-ids", "0", "--policy", spec, "--max-steps", "2", "--max-tokens", "12", "--out", str(out), "--json"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        assert summary["episodes"] == 1 and summary["errors"] == 0
        (trajectory,) = RolloutStore.load(out)
        assert trajectory.metadata["policy"] == spec and trajectory.messages[2].role == "assistant"
        firsts[name] = trajectory.messages[2].model_dump()
    assert firsts["base"] != firsts["adapted"]  # the adapter is really applied
