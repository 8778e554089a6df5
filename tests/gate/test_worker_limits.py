"""One path, limits too: the gate's workers and training's pooled workers are the same sandbox from inside.

An env that reports what it sees of its sandbox (rlimits from ``/proc/self/limits``, the sizes of its writable
mounts, its environment, command line and import path) is opened the way the gate opens its lanes and the way
training's env pool (and ``gym.make``) opens a worker; every report must be the same. Before the limits had one
definition, the gate's lanes ran under a 30 s CPU rlimit and training's under 6 h: an env could have told the two
apart from ``/proc/self/limits`` alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from env_registry.hosted import WORKER_LIMITS
from sandbox import available_backends

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
SOURCE = (Path(__file__).resolve().parent / "envs" / "sees_its_sandbox.py").read_text()


def _seen(messages: list[dict[str, Any]]) -> dict[str, Any]:
    first_user = next(m for m in messages if m.get("role") == "user")
    return json.loads(first_user["content"])


@pytest.fixture(scope="module")
def gym_id(tmp_path_factory: pytest.TempPathFactory) -> str:
    from env_registry.registration import register_all
    from env_registry.registry import Registry
    from trace_env.loader import load_env

    root = tmp_path_factory.mktemp("limits-registry")
    env = load_env(SOURCE)
    manifest, _ = Registry(root).put(SOURCE, capability=env.capability, target=env.target, tools=env.tools(),
                                     max_steps=env.max_steps)
    register_all(root)
    return manifest.gym_id


@pytest.mark.parametrize("backend", SANDBOXED)
def test_the_gate_and_training_open_the_same_sandbox(backend: str, gym_id: str) -> None:
    import gymnasium as gym

    from factory.validation.lanes import opener
    from schemas.validation import ValidationConfig
    from trainer.envpool import EnvPool

    config = ValidationConfig()
    with opener(SOURCE, backend, None, config.load_timeout_s, config.rpc_timeout_s)() as lane:  # a gate lane
        gate_seen = _seen(lane.call("reset", {"seed": 3})["info"]["messages"])
    with EnvPool(gym_id, sandbox=backend) as pool:  # a pooled training worker
        pool.ensure(1)
        _, info = pool.envs[0].reset(seed=3)
        training_seen = _seen(info["messages"])
    plain = gym.make(gym_id, sandbox=backend, disable_env_checker=True)  # what any RL code gets
    try:
        _, info = plain.reset(seed=3)
        gym_seen = _seen(info["messages"])
    finally:
        plain.close()

    cpu_line = next(line for line in gate_seen["limits"].splitlines() if line.startswith("Max cpu time"))
    assert str(WORKER_LIMITS.cpu_seconds) in cpu_line, cpu_line  # the run-sized CPU rlimit, in the gate too
    nofile = next(line for line in gate_seen["limits"].splitlines() if line.startswith("Max open files"))
    assert str(WORKER_LIMITS.open_files) in nofile, nofile
    for key in gate_seen:
        assert training_seen[key] == gate_seen[key], f"training's worker sees another {key} than the gate's"
        assert gym_seen[key] == gate_seen[key], f"gym.make's worker sees another {key} than the gate's"
