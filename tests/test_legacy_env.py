"""Compatibility: an env module in the previous release's form still validates, registers and runs via gym.make.

``tests/envs/tiny_cancel.py`` is kept byte for byte as release fa7e9cf shipped it: it imports
``from env_registry import sdk`` (the SDK's old home) and defines one ``TaskEnv`` subclass. It must pass the
gate in a real sandbox, register, and run through ``gym.make("trace/tiny_cancel-v0")`` in a fresh process,
where the env again runs only inside a sandbox worker. (Its reward has a hole the exploit search of issue 18 finds;
that verdict is about its content, not its form, and is the one failure allowed here.)
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import factory
from env_registry.registry import Registry
from sandbox import available_backends
from schemas.validation import ValidationConfig
from trace_env.loader import load_env

PREVIOUS_RELEASE_SHA256 = "7453c990040fd24b62c67163adcbba2baf7902e9ec2421cea686a651e838f494"  # fa7e9cf's file
BACKEND = "bwrap" if available_backends().get("bwrap") is None else "docker"
FAST = ValidationConfig(solvability_seeds=30, necessity_seeds=30, diversity_seeds=60, fuzz_examples=15)
PLAY = """
import json, sys
import gymnasium as gym, env_registry
env = gym.make("trace/tiny_cancel-v0")
for episode in json.loads(sys.argv[1]):
    observation, info = env.reset(seed=episode["seed"])
    for action in episode["actions"]:
        observation, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    print(json.dumps({"reward": reward, "terminated": terminated, "runner": type(env.unwrapped.runner).__name__}))
env.close()
"""


def test_the_fixture_is_the_previous_release_module(tiny_source: str) -> None:
    assert hashlib.sha256(tiny_source.encode()).hexdigest() == PREVIOUS_RELEASE_SHA256, (
        "tests/envs/tiny_cancel.py must stay as the previous release shipped it: it is the compatibility fixture")
    assert "from env_registry import sdk" in tiny_source and "trace_env" not in tiny_source


@pytest.mark.slow
def test_previous_release_env_validates_registers_and_runs_through_gym_make(tmp_path: Path, tiny_source: str) -> None:
    report = factory.validate(tiny_source, backend=BACKEND, config=FAST)
    assert report.backend == BACKEND
    # The previous release's form passes every check; what the exploit search finds is a hole in this fixture's
    # reward (reading the reservation and saying nothing earns 0.75 of the reference), not in its form.
    assert {c.name for c in report.failures()} <= {"exploit_search"}, [(c.name, c.figure, c.message) for c in report.failures()]
    declared = report.env_info
    manifest, created = Registry(tmp_path).put(
        tiny_source, capability=declared["capability"], target=declared["target"], tools=declared["tools"],
        max_steps=declared["max_steps"], report=report.model_dump(mode="json"), validation="passed")
    assert created and manifest.gym_id == "trace/tiny_cancel-v0"
    env = load_env(tiny_source)  # trusted test code: only to know the reference actions of each seed
    scenarios = {seed: env.generate(seed) for seed in range(1, 9)}
    seeds = [next(s for s, sc in scenarios.items() if sc.truth["cancel"] is wanted) for wanted in (True, False)]
    episodes = [{"seed": seed, "actions": [t.to_message() for t in env.reference_solution(scenarios[seed])]}
                for seed in seeds]  # one reservation to cancel, one to refuse
    environment = {k: v for k, v in os.environ.items() if k != "TRACE_FACTORY_UNSAFE_INPROCESS"}
    environment["TRACE_FACTORY_REGISTRY"] = str(tmp_path)
    result = subprocess.run([sys.executable, "-c", PLAY, json.dumps(episodes)], env=environment, capture_output=True,
                            text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    outcomes = [json.loads(line) for line in result.stdout.splitlines()[-2:]]
    assert outcomes == [{"reward": 1.0, "terminated": True, "runner": "SandboxedRunner"}] * 2, outcomes
