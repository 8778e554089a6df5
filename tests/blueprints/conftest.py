"""Fixtures shared by the per-blueprint tests; each test module names its blueprint in ``CAPABILITY``."""

from __future__ import annotations

import pytest

from env_registry import sdk
from trace_env.loader import load_env
from trace_env.engine import run_episode
from factory.blueprints import blueprint_source

SEEDS = range(100)


@pytest.fixture(scope="module")
def env(request: pytest.FixtureRequest) -> sdk.TaskEnv:
    return load_env(blueprint_source(request.module.CAPABILITY))


@pytest.fixture(scope="module")
def scenarios(env: sdk.TaskEnv) -> dict[int, sdk.Scenario]:
    return {seed: env.generate(seed) for seed in range(200)}


@pytest.fixture(scope="module")
def runs(env: sdk.TaskEnv, scenarios: dict[int, sdk.Scenario]) -> dict[int, tuple[dict, dict]]:
    """Reference and capability-skipping episodes for seeds 0..99, computed once per module."""
    return {
        seed: (run_episode(env, seed, env.reference_solution(scenarios[seed])),
               run_episode(env, seed, env.capability_skipping_solution(scenarios[seed])))
        for seed in SEEDS
    }
