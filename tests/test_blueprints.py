"""The acceptance bar every shipped blueprint must clear (issue: six built-in capability blueprints)."""

from __future__ import annotations

import json
import warnings
from functools import lru_cache

import pytest
from gymnasium.utils.env_checker import check_env

from env_registry import sdk
from env_registry.gym_env import TraceEnv
from env_registry.hosted import SandboxedEnv
from trace_env.loader import load_env
from trace_env.engine import EpisodeRunner, run_episode
from factory.blueprints import blueprint_names, blueprint_source
from sandbox import available_backends
from schemas.tools import interface_diff, strip_free_text
from tests.conftest import SHARED_TARGETS
from trace_env.kits import KIT_FOR_TARGET

PAPER_CAPABILITIES = {
    "precondition_verification",
    "structured_data_reasoning",
    "tool_calling_precision",
    "multi_step_task_completion",
    "permission_error_recovery",
    "datetime_reasoning",
}
REAL_TOOLS = {
    "tau2-airline": SHARED_TARGETS / "tau2" / "airline" / "tools.json",
    "tau2-retail": SHARED_TARGETS / "tau2" / "retail" / "tools.json",
    "toolsandbox": SHARED_TARGETS / "toolsandbox" / "tools.json",
}
SEEDS = range(100)


@lru_cache(maxsize=None)
def blueprint(name: str) -> sdk.TaskEnv:
    return load_env(blueprint_source(name), module_name=f"test_blueprint_{name}")


@lru_cache(maxsize=None)
def solution_rewards(name: str, which: str) -> tuple[float, ...]:
    """Rewards over SEEDS; an episode in which the env's own code failed counts as a failed episode."""
    env = blueprint(name)
    solve = env.reference_solution if which == "reference" else env.capability_skipping_solution
    rewards = []
    for seed in SEEDS:
        episode = run_episode(env, seed, solve(env.generate(seed)))
        rewards.append(float("nan") if episode["env_errors"] else episode["reward"])
    return tuple(rewards)


def test_the_six_paper_capabilities_are_shipped() -> None:
    assert PAPER_CAPABILITIES <= set(blueprint_names())


@pytest.mark.parametrize("name", blueprint_names())
def test_identity(name: str) -> None:
    env = blueprint(name)
    assert env.capability == name
    assert env.target in REAL_TOOLS
    assert env.description and env.max_steps >= 4
    assert set(env.write_tools) <= set(env.tool_names)


@pytest.mark.parametrize("name", blueprint_names())
def test_check_env_passes(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(TraceEnv(runner=EpisodeRunner(blueprint(name))), skip_render_check=True)


@pytest.mark.parametrize("name", blueprint_names())
def test_reference_solution_solves(name: str) -> None:
    rewards = solution_rewards(name, "reference")
    solved = sum(r >= 0.99 for r in rewards)
    assert solved >= 98, f"reference scored >= 0.99 on only {solved}/100 seeds; worst: {sorted(rewards)[:3]}"


@pytest.mark.parametrize("name", blueprint_names())
def test_capability_is_necessary(name: str) -> None:
    rewards = solution_rewards(name, "skipping")
    low = sum(r <= 0.5 for r in rewards)
    assert low >= 90, f"capability-skipping solution scored <= 0.5 on only {low}/100 seeds"


@pytest.mark.parametrize("name", blueprint_names())
def test_scenarios_are_diverse(name: str) -> None:
    env = blueprint(name)
    scenarios = [env.generate(seed) for seed in range(200)]
    distinct = len({s.fingerprint() for s in scenarios})
    assert distinct >= 190, f"only {distinct}/200 distinct scenarios"
    truths = {sdk.canonical_json(s.truth) for s in scenarios}
    assert len(truths) >= 20, f"ground truth takes only {len(truths)} values over 200 seeds"


@pytest.mark.parametrize("name", blueprint_names())
def test_same_seed_and_actions_give_same_transcript(name: str) -> None:
    env = blueprint(name)
    for seed in (0, 17, 4242):
        assert env.generate(seed).to_dict() == env.generate(seed).to_dict()
        for solve in (env.reference_solution, env.capability_skipping_solution):
            actions = solve(env.generate(seed))
            assert run_episode(env, seed, actions) == run_episode(env, seed, actions)


@pytest.mark.parametrize("name", blueprint_names())
def test_tool_schemas_equal_the_real_target(name: str) -> None:
    env = blueprint(name)
    real_file = REAL_TOOLS[env.target]
    if not real_file.exists():
        pytest.skip(f"real target data not found at {real_file}")
    real = {t["function"]["name"]: strip_free_text(t) for t in json.loads(real_file.read_text())}
    for schema in env.tools():
        name_ = schema["function"]["name"]
        assert name_ in real, f"{name_} is not a tool of {env.target}"
        diffs = interface_diff(strip_free_text(schema), real[name_])
        assert not diffs, f"{name_}: {diffs}"
    assert env.tool_names == [s["function"]["name"] for s in env.tools()]


GARBAGE = [
    "",
    "{not json",
    '<tool_call>{"name": "x"',
    '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
    "x" * 100_000,
    {"content": None, "tool_calls": [{"function": {"name": "calculate", "arguments": [1]}}]},
    {"tool_calls": "not a list"},
    "[1, 2, 3]",
    "\x00\udcff binary-ish",
]


@pytest.mark.parametrize("name", blueprint_names())
def test_garbage_actions_never_raise(name: str) -> None:
    env = blueprint(name)
    runner = EpisodeRunner(env)
    env_errors: list[dict[str, str]] = []
    for seed, garbage in enumerate(GARBAGE):
        runner.reset(seed)
        result = runner.step(garbage)
        assert isinstance(result.observation, str)
        env_errors += runner.env_errors
    # wrong argument types and missing arguments for every exposed tool
    for schema in env.tools():
        runner.reset(1)
        params = schema["function"].get("parameters", {}).get("properties", {})
        wrong = {key: {"nested": [1, 2]} for key in params} or {"unexpected": 1}
        for arguments in (wrong, {}):
            if runner.done:
                runner.reset(1)
            result = runner.step(sdk.Turn(tool_calls=[sdk.Call(schema["function"]["name"], arguments)]))
            assert isinstance(result.observation, str)
            env_errors += runner.env_errors
    assert not env_errors, env_errors


# Not an env: loaded into a worker after a blueprint, it reports what that worker process has imported.
IMPORT_PROBE = """
import sys
from trace_env import sdk


class ImportProbe(sdk.TaskEnv):
    capability = "import_probe"
    target = "tau2-airline"

    def generate(self, seed):
        return sdk.Scenario(seed=seed, state={}, user={}, truth={}, meta={"modules": sorted(sys.modules)})
"""
HOST_ONLY = ("gymnasium", "numpy", "pydantic")


@pytest.mark.slow
def test_sandbox_worker_imports_no_host_libraries() -> None:
    """One real sandbox worker loads every blueprint in turn (and builds a scenario with it); after each, the
    worker's sys.modules holds the blueprint's kit and none of gymnasium, numpy or pydantic."""
    backend = "bwrap" if available_backends().get("bwrap") is None else "docker"
    names = blueprint_names()
    with SandboxedEnv(IMPORT_PROBE, backend=backend) as hosted:
        assert hosted.backend == backend
        for name in names:
            info = hosted.call("load", {"source": blueprint_source(name), "module_name": f"worker_{name}"})
            assert info["capability"] == name
            hosted.call("generate", {"seed": 0})
            hosted.call("load", {"source": IMPORT_PROBE})
            modules = hosted.call("generate", {"seed": 0})["meta"]["modules"]
            assert f"trace_env.kits.{KIT_FOR_TARGET[info['target']]}" in modules  # the probe sees the same process
            leaked = sorted(m for m in modules if m.split(".")[0] in HOST_ONLY)
            assert not leaked, (name, leaked)
