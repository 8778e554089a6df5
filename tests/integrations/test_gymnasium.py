"""Gymnasium beyond gym.make: async vector envs, episode limits in the spec, graded truncation from outside,
path-free specs, pickled envs that step in another process."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from tests.conftest import REPO_ROOT, TEST_ENVS
from trace_env.loader import load_env

TINY = load_env((TEST_ENVS / "tiny_cancel.py").read_text())


def lookup(seed: int) -> str:
    """The agent's turn that reads the seed's reservation (a step that never ends the episode)."""
    rid = TINY.generate(seed).user["reservation_id"]
    return f'<tool_call>{{"name": "get_reservation_details", "arguments": {{"reservation_id": "{rid}"}}}}</tool_call>'


def test_async_vector_env_returns_the_same_observations_as_sync(tiny_id: str) -> None:
    seeds = [3, 4]
    observations = {}
    for mode in ("sync", "async"):
        envs = gym.make_vec(tiny_id, num_envs=2, vectorization_mode=mode)
        try:
            first, _ = envs.reset(seed=seeds)
            after, rewards, terminated, truncated, _ = envs.step((lookup(3), "Which reservation is it?"))
            observations[mode] = (tuple(first), tuple(after), rewards.tolist(), terminated.tolist(), truncated.tolist())
        finally:
            envs.close()
    assert observations["async"] == observations["sync"]
    first, after = observations["async"][:2]
    assert all(text.startswith("[system]") and len(text) < 10_000 for text in first)
    assert after[0].startswith("[tool get_reservation_details] {") and after[1].startswith("[user] ")


def test_the_spec_reports_the_turn_limit_and_holds_no_machine_path(tiny_id: str, integration_registry: Path) -> None:
    env = gym.make(tiny_id)
    limited = gym.make(tiny_id, max_steps=2)
    try:
        assert env.spec.max_episode_steps == TINY.max_steps == 6
        assert env.spec.kwargs == {"capability": "tiny_cancel", "version": 0}
        assert str(integration_registry) not in env.spec.to_json() and "/" not in json.dumps(env.spec.kwargs)
        assert limited.spec.max_episode_steps == 2 and limited.spec.kwargs["max_steps"] == 2
        _, info = limited.reset(seed=3)
        assert info["max_steps"] == 2
        assert limited.step(lookup(3))[3] is False
        _, reward, terminated, truncated, info = limited.step(lookup(3))
        assert (terminated, truncated, info["ended_by"]) == (False, True, "max_steps") and "reward_components" in info
    finally:
        env.close()
        limited.close()
    with pytest.raises(ValueError, match="max_steps must be an integer"):
        gym.make(tiny_id, max_steps=0)


def test_a_time_limit_truncation_is_graded_like_the_envs_own_limit(tiny_id: str) -> None:
    """gym.make's TimeLimit cuts at step 2; the env's own limit of 2 cuts at the same state: same grade, not 0."""
    outcomes = []
    for kwargs in ({"max_episode_steps": 2}, {"max_steps": 2}):
        env = gym.make(tiny_id, **kwargs)
        try:
            env.reset(seed=3)
            env.step(lookup(3))
            _, reward, terminated, truncated, info = env.step(lookup(3))
            outcomes.append((reward, terminated, truncated, info["ended_by"], info["reward_components"]))
            assert [m["role"] for m in info["messages"]][-2:] == ["assistant", "tool"]
        finally:
            env.close()
    assert outcomes[0] == outcomes[1]
    reward, _, truncated, _, components = outcomes[0]
    assert truncated and reward > 0 and components["checked"] == 1.0


def test_truncate_ends_an_episode_from_outside_with_its_grade(tiny_id: str) -> None:
    env = gym.make(tiny_id)
    try:
        env.reset(seed=3)
        env.step(lookup(3))
        _, reward, terminated, truncated, info = env.unwrapped.truncate()
        assert (terminated, truncated, info["ended_by"], info["truncated_by"]) == (False, True, "max_steps", "caller")
        assert reward == info["reward_detail"]["total"] > 0 and info["reward_components"]["checked"] == 1.0
    finally:
        env.close()


STEP_ELSEWHERE = """
import pickle, sys
env = pickle.loads(sys.stdin.buffer.read())
obs, info = env.reset(seed=3)
_, reward, terminated, truncated, info = env.step({action!r})
print(type(env.unwrapped.runner).__name__, obs.startswith("[system]"), truncated, info["steps"])
env.close()
"""


def test_a_pickled_env_steps_after_unpickling_in_another_process(tiny_id: str, tmp_path: Path) -> None:
    env = gym.make(tiny_id, max_episode_steps=1)
    env.reset(seed=3)  # a live worker: it is not what travels
    blob = pickle.dumps(env)
    env.close()
    environment = {k: v for k, v in os.environ.items() if k != "TRACE_FACTORY_UNSAFE_INPROCESS"}
    environment.update(PYTHONPATH=str(REPO_ROOT), TRACE_FACTORY_REGISTRY=str(tmp_path / "empty"))  # the env travels whole
    result = subprocess.run([sys.executable, "-c", STEP_ELSEWHERE.format(action=lookup(3))], input=blob, capture_output=True,
                            env=environment, timeout=180)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert result.stdout.decode().split() == ["SandboxedRunner", "True", "True", "1"]


def test_an_env_built_around_a_runner_says_why_it_cannot_be_pickled() -> None:
    from env_registry.gym_env import TraceEnv
    from trace_env.engine import EpisodeRunner

    with pytest.raises(TypeError, match="make it with gym.make"):
        pickle.dumps(TraceEnv(runner=EpisodeRunner(TINY)))
