"""``factory serve`` exposes a registered env as an OpenEnv server: OpenEnv's own client, two sessions at once,
gets the observations and rewards gym.make gives on the same seeds and turns.

openenv-core's FastAPI/Gradio pins stay out of the main install, so the server and the client run in the
``.venv-openenv`` interpreter (``bash scripts/setup.sh --dev``; ``TRACE_OPENENV_PYTHON`` names another one).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import gymnasium as gym
import pytest

from tests.conftest import REPO_ROOT, TEST_ENVS
from trace_env.loader import load_env


def openenv_python() -> str | None:
    named = os.environ.get("TRACE_OPENENV_PYTHON")
    for candidate in ([named] if named else []) + [str(REPO_ROOT / ".venv-openenv" / "bin" / "python")]:
        if Path(candidate).exists():
            return candidate
    return None


PYTHON = openenv_python()
pytestmark = pytest.mark.skipif(PYTHON is None, reason="no OpenEnv interpreter: run `bash scripts/setup.sh --dev` (makes .venv-openenv)")
TINY = load_env((TEST_ENVS / "tiny_cancel.py").read_text())
SEEDS = [3, 4]

CLIENT = """
import asyncio, json, sys
from openenv.core.generic_client import GenericEnvClient

url, plan = sys.argv[1], json.loads(sys.argv[2])

async def session(seed, turns):
    out = []
    async with GenericEnvClient(base_url=url) as env:
        result = await env.reset(seed=seed)
        out.append([result.observation["text"], result.reward, result.done])
        for turn in turns:
            result = await env.step({"message": turn})
            out.append([result.observation["text"], result.reward, result.done, result.observation["info"].get("reward_components")])
    return out

async def main():
    return await asyncio.gather(*(session(int(seed), turns) for seed, turns in plan.items()))

print(json.dumps(asyncio.run(main())))
"""


def turns(seed: int) -> list[str]:
    """The reference solution as raw text turns (a Hermes call, then the reply), ending the episode."""
    out = []
    for turn in TINY.reference_solution(TINY.generate(seed)):
        if turn.tool_calls:
            call = turn.tool_calls[0]
            out.append(f"<tool_call>{json.dumps({'name': call.name, 'arguments': call.arguments})}</tool_call>")
        else:
            out.append(turn.content)
    return out


@pytest.fixture
def server(tiny_id: str, integration_registry: Path) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = {k: v for k, v in os.environ.items() if k != "TRACE_FACTORY_UNSAFE_INPROCESS"}
    environment.update(PYTHONPATH=str(REPO_ROOT))
    process = subprocess.Popen(
        [PYTHON, "-m", "factory.cli", "serve", tiny_id, "--port", str(port), "--max-sessions", "2", "--registry", str(integration_registry)],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, "factory serve", lambda: process.stdout.read() if process.stdout else "",
                     exited=lambda: process.poll() is not None)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def gym_episode(env_id: str, seed: int) -> list[list]:
    env = gym.make(env_id)
    try:
        text, _ = env.reset(seed=seed)
        out: list[list] = [[text, 0.0, False]]
        for turn in turns(seed):
            text, reward, terminated, truncated, info = env.step(turn)
            out.append([text, reward, terminated or truncated, info.get("reward_components")])
        return out
    finally:
        env.close()


def wait_healthy(url: str, what: str, output: Callable[[], str], exited: Callable[[], bool] = lambda: False) -> None:
    """Until ``url`` says it is healthy (120 s at most); else fail naming ``what`` with its ``output``."""
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                assert json.loads(response.read())["status"] == "healthy"
                return
        except OSError:
            if exited() or time.monotonic() > deadline:
                raise AssertionError(f"{what} did not come up: {output()}") from None
            time.sleep(0.5)


def client_gets_what_gym_gives(url: str, env_id: str, env: dict[str, str]) -> list[list[list]]:
    """OpenEnv's client plays SEEDS in concurrent sessions against ``url``; each episode must be gym.make's and end
    with the env's reward. The episodes it got."""
    assert PYTHON is not None
    plan = {str(seed): turns(seed) for seed in SEEDS}
    result = subprocess.run([PYTHON, "-c", CLIENT, url, json.dumps(plan)], capture_output=True, text=True, timeout=300,
                            env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served == [gym_episode(env_id, seed) for seed in SEEDS]
    assert all(episode[-1][2] and episode[-1][1] > 0 for episode in served)  # each ended, with the env's reward
    return served


def test_openenvs_client_gets_what_gym_make_gives_in_concurrent_sessions(server: str, tiny_id: str) -> None:
    served = client_gets_what_gym_gives(server, tiny_id, {**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert served[0][0][0] != served[1][0][0] or TINY.generate(3).user != TINY.generate(4).user


def test_serve_refuses_an_unknown_env_in_one_line(integration_registry: Path) -> None:
    result = subprocess.run([PYTHON, "-m", "factory.cli", "serve", "trace/nope-v0", "--registry", str(integration_registry)],
                            capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert result.returncode == 2 and "no such registered env" in result.stderr and "Traceback" not in result.stderr
