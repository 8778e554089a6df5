"""verifiers' own entry points reach a registered env: ``vf.load_environment`` and the ``vf-eval`` CLI import
``integrations.verifiers`` as the environment module and run episodes to the env's reward. They run in the
verifiers interpreter (see test_verifiers.py), against the loopback scripted LLM server."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from factory.testing.llm_server import ScriptedLLMServer
from tests.conftest import REPO_ROOT
from tests.integrations.test_verifiers import PYTHON

pytestmark = pytest.mark.skipif(PYTHON is None, reason="no verifiers interpreter: run `bash scripts/setup.sh --dev` (makes .venv-verifiers)")

CALL = '<tool_call>{"name": "set_wifi_status", "arguments": {"on": true}}</tool_call>'
LOADER = """
import json, sys
import verifiers as vf
from openai import AsyncOpenAI

env_id, base_url = sys.argv[1:3]
env = vf.load_environment("integrations.verifiers", env=env_id, seeds=2)
client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=base_url, api_key="test"))
out = env.evaluate_sync(client, model="scripted-model", num_examples=2)
print(json.dumps({"type": type(env).__name__, "env_id": env.env_id, "rewards": [o["reward"] for o in out["outputs"]]}))
"""


def environment(registry: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRACE_FACTORY_UNSAFE_INPROCESS"}
    env.update(PYTHONPATH=str(REPO_ROOT), TRACE_FACTORY_REGISTRY=str(registry), SCRIPTED_KEY="test")
    return env


def test_vf_load_environment_imports_the_module_and_runs_episodes(wifi_id: str, integration_registry: Path) -> None:
    with ScriptedLLMServer(lambda request: CALL) as server:
        result = subprocess.run([PYTHON, "-c", LOADER, wifi_id, server.openai_base_url], capture_output=True, text=True,
                                env=environment(integration_registry), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == {"type": "TraceVerifiersEnv", "env_id": "integrations.verifiers", "rewards": [1.0, 1.0]}


def test_vf_eval_runs_a_registered_env(wifi_id: str, integration_registry: Path, tmp_path: Path) -> None:
    vf_eval = str(Path(PYTHON).with_name("vf-eval"))
    with ScriptedLLMServer(lambda request: CALL) as server:
        result = subprocess.run(
            [vf_eval, "integrations.verifiers", "-a", json.dumps({"env": wifi_id, "seeds": 2}), "-m", "scripted-model",
             "-b", server.openai_base_url, "-k", "SCRIPTED_KEY", "-n", "2", "-r", "1", "-s", "-o", str(tmp_path / "out"), "--disable-tui"],
            capture_output=True, text=True, env=environment(integration_registry), timeout=300, cwd=tmp_path,
        )
        requests = len(server.requests)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    saved = sorted((tmp_path / "out").rglob("results.jsonl"))
    assert saved, sorted(str(p) for p in (tmp_path / "out").rglob("*"))
    rows = [json.loads(line) for line in saved[0].read_text().splitlines() if line.strip()]
    assert [row["reward"] for row in rows] == [1.0, 1.0] and requests == 2


def test_a_clash_free_parameter_and_a_clear_refusal(integration_registry: Path) -> None:
    script = "import verifiers as vf\ntry:\n    vf.load_environment('integrations.verifiers', env='precondition')\nexcept Exception as e:\n    print(e)"
    result = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, env=environment(integration_registry), timeout=300)
    assert "pass a registered env id" in result.stdout, result.stdout + result.stderr[-2000:]
