"""The README's "Use from TRL, verifiers and Gymnasium" snippets run as written, with three substitutions that
make them cheap here: the TRL snippet trains the tiny local model on trace/wifi_on-v0 with 16 new tokens per
turn, and the verifiers snippet talks to the loopback scripted LLM server (through OPENAI_BASE_URL, as written).
The Gymnasium snippet runs unchanged on the real precondition_verification blueprint."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.integrations.conftest import register
from tests.integrations.test_verifiers import PYTHON as VERIFIERS_PYTHON

SECTION = "## Use from TRL, verifiers and Gymnasium"


def snippets() -> dict[str, str]:
    text = (REPO_ROOT / "README.md").read_text()
    body = text[text.index(SECTION):]
    body = body[: body.index("\n## ", len(SECTION))]
    blocks = re.findall(r"```python\n(.*?)```", body, re.S)
    named = {name: next(b for b in blocks if marker in b) for name, marker in
             (("gymnasium", "make_vec"), ("trl", "GRPOTrainer"), ("verifiers", "load_environment"))}
    assert len(blocks) == 3
    return named


@pytest.fixture
def precondition_id(integration_registry: Path) -> str:
    from env_registry.registration import register_version
    from env_registry.registry import Registry
    from factory.blueprints import blueprint_source
    from trace_env.loader import load_env

    source = blueprint_source("precondition_verification")
    env = load_env(source)
    manifest, _ = Registry(integration_registry).put(source, capability=env.capability, target=env.target, tools=env.tools(),
                                                     max_steps=env.max_steps)
    register_version(manifest.capability, manifest.version, integration_registry, replace=True)
    return manifest.gym_id


def run(python: str, code: str, cwd: Path, registry: Path, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if k != "TRACE_FACTORY_UNSAFE_INPROCESS"}
    environment.update(PYTHONPATH=str(REPO_ROOT), TRACE_FACTORY_REGISTRY=str(registry), TRL_EXPERIMENTAL_SILENCE="1", **env)
    result = subprocess.run([python, "-c", code], cwd=cwd, capture_output=True, text=True, env=environment, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_the_gymnasium_snippet(precondition_id: str, integration_registry: Path, tmp_path: Path) -> None:
    assert precondition_id == "trace/precondition_verification-v0"
    out = run(sys.executable, snippets()["gymnasium"], tmp_path, integration_registry)
    terminated, truncated, reward = out.split()[:3]
    assert "True" in (terminated, truncated) and 0.0 <= float(reward) <= 1.0


@pytest.mark.slow
def test_the_trl_snippet(wifi_id: str, tiny_model: Path, integration_registry: Path, tmp_path: Path) -> None:
    code = (snippets()["trl"].replace('"Qwen/Qwen3-0.6B"', repr(str(tiny_model)))
            .replace('"trace/precondition_verification-v0"', repr(wifi_id)).replace("max_new_tokens=256", "max_new_tokens=16"))
    run(sys.executable, code + "\nassert trainer.state.global_step == 2\n", tmp_path, integration_registry, CUDA_VISIBLE_DEVICES="")


@pytest.mark.skipif(VERIFIERS_PYTHON is None, reason="no verifiers interpreter: run `bash scripts/setup.sh --dev`")
def test_the_verifiers_snippet(wifi_id: str, integration_registry: Path, tmp_path: Path) -> None:
    from factory.testing.llm_server import ScriptedLLMServer

    code = snippets()["verifiers"].replace('"trace/precondition_verification-v0"', repr(wifi_id))
    call = '<tool_call>{"name": "set_wifi_status", "arguments": {"on": true}}</tool_call>'
    with ScriptedLLMServer(lambda request: call) as server:
        out = run(str(VERIFIERS_PYTHON), code, tmp_path, integration_registry, OPENAI_BASE_URL=server.openai_base_url)
    assert out.strip().splitlines()[-1] == "[1.0, 1.0]"
