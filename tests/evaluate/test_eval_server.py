"""``factory eval --engine server``: the arms as requests to an OpenAI-compatible server with LoRA modules
(vLLM's serving convention), faked by the scripted LLM server behind the real openai SDK. The routed arm
still routes with the local base model (here the tiny one) and asks the server for the chosen adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factory.cli import app
from factory.testing.llm_server import RecordedRequest, ScriptedLLMServer, ScriptedReply
from tests.evaluate.conftest import CAPABILITY
from tests.targets.helpers import requires_servers

pytestmark = requires_servers


@pytest.mark.slow
def test_arms_ask_the_server_for_the_base_model_the_adapter_and_the_routed_choice(
    tiny_path: Path, adapters_dir: Path, gated_registry: Path, tmp_path: Path
) -> None:
    def serve(request: RecordedRequest) -> ScriptedReply | str:
        if request.path.endswith("/load_lora_adapter"):  # as when the server was started with --lora-modules
            return ScriptedReply(status=400, text=f"The lora adapter '{CAPABILITY}' has already been loaded.")
        return "I cannot change that booking. ###STOP###"

    with ScriptedLLMServer(serve) as server:
        result = CliRunner().invoke(app, [
            "eval", "--target", "tau2-airline", "--task-ids", "0,3", "--adapters", str(adapters_dir), "--registry", str(gated_registry),
            "--model", str(tiny_path), "--engine", "server", "--base-url", server.openai_base_url, "--served-model", "served-base",
            "--load-adapters", "--out", str(tmp_path / "out"), "--json",
        ])  # fmt: skip
        requests = list(server.requests)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (load,) = loads_of(requests)
    assert load.body == {"lora_name": CAPABILITY, "lora_path": str((adapters_dir / CAPABILITY).resolve())}
    chats = [r for r in requests if r.path.endswith("/chat/completions")]
    assert len(chats) == 6  # 3 arms x 2 tasks x one turn each (the agent stops at once)
    base, adapter, routed = chats[:2], chats[2:4], chats[4:]
    assert {r.body["model"] for r in base} == {"served-base"}
    assert {r.body["model"] for r in adapter} == {CAPABILITY}
    decisions = {d["task_id"]: d["choice"] for d in map(json.loads, (tmp_path / "out" / "arms" / "routed" / "decisions.jsonl").read_text().splitlines())}
    asked = sorted(r.body["model"] for r in routed)
    assert asked == sorted(choice or "served-base" for choice in decisions.values())
    assert [a["policy"] for a in report["arms"]] == ["compat:served-base", f"compat:{CAPABILITY}", "routed:compat:served-base"]


def loads_of(requests: list[RecordedRequest]) -> list[RecordedRequest]:
    return [r for r in requests if r.path.endswith("/load_lora_adapter")]


def test_a_server_that_refuses_the_adapter_is_one_line(adapters_dir: Path, tiny_path: Path, tmp_path: Path) -> None:
    with ScriptedLLMServer([ScriptedReply(status=404, text="Not Found")]) as server:
        result = CliRunner().invoke(app, [
            "eval", "--target", "tau2-airline", "--task-ids", "0", "--adapters", str(adapters_dir), "--arms", "base,adapters",
            "--model", str(tiny_path), "--engine", "server", "--base-url", server.openai_base_url, "--load-adapters",
            "--out", str(tmp_path / "out"),
        ])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "refused adapter precondition_verification (404" in result.output and "VLLM_ALLOW_RUNTIME_LORA_UPDATING" in result.output
    assert len(result.output.strip().splitlines()) == 1
