"""verifiers runs episodes of a registered env, driven by the real openai SDK against the loopback LLM server.

verifiers' pins cannot share an install with the ``targets`` extra (mcp), so it lives in its own virtual
environment (``bash scripts/setup.sh --dev`` makes ``.venv-verifiers``, on top of the system packages);
these tests run their episodes with that interpreter. ``TRACE_VERIFIERS_PYTHON`` names another one.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, TEST_ENVS
from trace_env.engine import run_episode
from trace_env.loader import load_env


def verifiers_python() -> str | None:
    named = os.environ.get("TRACE_VERIFIERS_PYTHON")
    local = REPO_ROOT / ".venv-verifiers" / "bin" / "python"
    for candidate in ([named] if named else []) + [str(local)]:
        if Path(candidate).exists():
            return candidate
    return None


PYTHON = verifiers_python()
pytestmark = pytest.mark.skipif(PYTHON is None, reason="no verifiers interpreter: run `bash scripts/setup.sh --dev` (makes .venv-verifiers)")

EPISODES = """
import json, sys
import env_registry
from openai import AsyncOpenAI
import verifiers as vf
from factory.testing.llm_server import ScriptedLLMServer
from integrations.verifiers import load_environment

env_id, reply, kwargs = json.loads(sys.argv[1])
with ScriptedLLMServer(lambda request: reply) as server:
    env = load_environment(env_id, **kwargs)
    client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=server.openai_base_url, api_key="test"))
    out = env.evaluate_sync(client, model="scripted-model", num_examples=2, state_columns=["trace_info"])
    first = server.requests[0].body
print(json.dumps({
    "version": vf.__version__,
    "rewards": [o["reward"] for o in out["outputs"]],
    "stops": [o["stop_condition"] for o in out["outputs"]],
    "ended_by": [o["trace_info"]["ended_by"] for o in out["outputs"]],
    "requests": len(server.requests),
    "first_roles": [m["role"] for m in first["messages"]],
    "first_system": first["messages"][0]["content"],
    "tools": sorted(t["function"]["name"] for t in first.get("tools", [])),
}))
"""


def run_verifiers(env_id: str, reply: str, registry: Path, **kwargs: object) -> dict:
    environment = {k: v for k, v in os.environ.items() if k != "TRACE_FACTORY_UNSAFE_INPROCESS"}
    environment.update(PYTHONPATH=str(REPO_ROOT), TRACE_FACTORY_REGISTRY=str(registry))
    result = subprocess.run([PYTHON, "-c", EPISODES, json.dumps([env_id, reply, kwargs])], capture_output=True, text=True,
                            env=environment, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_verifiers_env_runs_episodes_to_the_envs_reward(wifi_id: str, integration_registry: Path) -> None:
    call = '<tool_call>{"name": "set_wifi_status", "arguments": {"on": true}}</tool_call>'
    out = run_verifiers(wifi_id, call, integration_registry, seeds=2)
    wifi = load_env((TEST_ENVS / "wifi_on.py").read_text())
    assert out["version"] == "0.3.1"
    assert out["rewards"] == [1.0, 1.0] and out["stops"] == ["has_final_env_response"] * 2 and out["requests"] == 2
    assert out["first_roles"] == ["system", "user"] and out["first_system"] == wifi.system_prompt(wifi.generate(0))
    assert out["tools"] == ["get_wifi_status", "set_wifi_status"]
    assert out["ended_by"] == ["tool:set_wifi_status"] * 2

    talk = run_verifiers(wifi_id, "Sure, one moment.", integration_registry, seeds=2)
    assert talk["rewards"] == [0.0, 0.0] and talk["ended_by"] == ["user"] * 2  # the user answered, then gave up


def test_a_rollout_verifiers_caps_is_graded_on_the_state_reached(tiny_id: str, integration_registry: Path) -> None:
    tiny = load_env((TEST_ENVS / "tiny_cancel.py").read_text())
    rid = tiny.generate(0).user["reservation_id"]
    lookup = f'<tool_call>{{"name": "get_reservation_details", "arguments": {{"reservation_id": "{rid}"}}}}</tool_call>'
    out = run_verifiers(tiny_id, lookup, integration_registry, seeds=1, max_turns=1)
    expected = run_episode(tiny, 0, [lookup])["reward"]  # the same turn, graded as it stands
    assert expected > 0
    assert out["rewards"] == [expected] and out["stops"] == ["max_turns_reached"] and out["ended_by"] == ["max_steps"]
