"""A real target behind the synthetic envs' Gymnasium face: same spaces, actions, observations and info keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import env_registry  # noqa: F401  (registers target/* ids)
from env_registry.gym_env import TraceEnv
from env_registry.targets.catalog import native_available
from env_registry.targets.env import TargetEnv
from env_registry.targets.errors import TargetConfigError
from trace_env.engine import EpisodeRunner
from trace_env.loader import load_env
from tests.targets.helpers import requires_servers, tool_call

pytestmark = requires_servers


@pytest.fixture(scope="module")
def airline() -> TargetEnv:
    env = gym.make("target/tau2-airline-v0", backend="mcp")
    yield env
    env.close()


def test_both_gym_make_spellings_work_in_a_fresh_process() -> None:
    code = (
        "import gymnasium as gym\n"
        "e = gym.make('env_registry.targets:target/tau2-retail-v0', task_id='5')\n"
        "obs, info = e.reset(seed=3)\n"
        "print(info['task_id'], obs.startswith('[system]'), type(e.unwrapped).__name__)\n"
        "e.close()\n"
        "import env_registry; print('target/tau2-airline-v0' in gym.registry, 'target/mcp-v0' in gym.registry)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={**os.environ})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["5", "True", "TargetEnv", "True", "True"]


def test_check_env_passes_without_warnings() -> None:
    env = TargetEnv("tau2-airline", task_id="0", backend="mcp")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_info_and_observations_follow_the_synthetic_envs(airline, tiny_source: str) -> None:
    synthetic = TraceEnv(runner=EpisodeRunner(load_env(tiny_source)))
    s_obs, s_info = synthetic.reset(seed=1)
    t_obs, t_info = airline.reset(seed=1, options={"task_id": "0"})
    assert set(s_info) <= set(t_info)
    assert t_obs.startswith("[system]\n") and "\n\n[tools]\n" in t_obs and "\n\n[user] " in t_obs
    assert [m["role"] for m in t_info["messages"]] == ["system", "user"]
    assert t_info["task_id"] == "0" and len(t_info["task_version"]) == 64
    names = {t["function"]["name"] for t in t_info["tools"]}
    assert "get_user_details" in names and not names & {"reset_state", "get_call_log"}
    assert all("state_key" not in json.dumps(t) for t in t_info["tools"])

    s_step = synthetic.step(tool_call("get_order", order_id="x"))
    t_step = airline.step(tool_call("get_user_details", user_id="mia_li_3668"))
    assert set(s_step[4]) - {"env_errors"} <= set(t_step[4])
    assert t_step[0].startswith("[tool get_user_details] {") and t_step[1:4] == (0.0, False, False)
    assert t_step[4]["new_messages"][0]["role"] == "tool"
    s_end = synthetic.step("Thanks, bye.")
    t_end = airline.step("###STOP###")
    assert set(s_end[4]) - {"env_errors"} <= set(t_end[4])
    assert t_end[4]["termination_reason"] == "agent_stop" and t_end[2] is True
    assert t_end[4]["reward_components"] == t_end[4]["reward_detail"]["gates"]


def test_every_action_form_reaches_the_same_tool(airline) -> None:
    forms = [
        tool_call("get_reservation_details", reservation_id="Q69X3R"),
        '<tool_call>{"name": "get_reservation_details", "arguments": {"reservation_id": "Q69X3R"}}</tool_call>',
        '{"name": "get_reservation_details", "arguments": {"reservation_id": "Q69X3R"}}',
    ]
    outputs = []
    for action in forms:
        airline.reset(seed=0, options={"task_id": "1"})
        outputs.append(airline.step(action)[0])
    assert len(set(outputs)) == 1 and '"reservation_id": "Q69X3R"' in outputs[0]


def test_the_agent_cannot_reach_bookkeeping(airline) -> None:
    airline.reset(seed=0, options={"task_id": "1"})
    hidden = airline.step(tool_call("reset_state", state_key="tau2/airline/default"))[0]
    assert "Tool 'reset_state' not found" in hidden
    keyed = airline.step(tool_call("get_user_details", user_id="mia_li_3668", state_key="someone-else"))[0]
    assert "unexpected keyword argument 'state_key'" in keyed
    broken = airline.step('<tool_call>{"name": "get_user_details", "arguments": {oops}</tool_call>')[0]
    assert "Error: tool call is not valid JSON" in broken


def test_seed_picks_the_task_unless_one_is_fixed(airline) -> None:
    ids = [airline.reset(seed=seed)[1]["task_id"] for seed in (0, 1, 50, 51)]
    assert ids == ["0", "1", "0", "1"]
    fixed = gym.make("target/tau2-airline-v0", task_id=7, backend="mcp")
    try:
        assert {fixed.reset(seed=s)[1]["task_id"] for s in range(3)} == {"7"}
    finally:
        fixed.close()


def test_max_steps_truncates_and_tool_errors_terminate() -> None:
    env = TargetEnv("tau2-airline", task_id="1", max_steps=2, max_errors=2, backend="mcp")
    try:
        env.reset(seed=0)
        assert env.step(tool_call("get_user_details", user_id="mia_li_3668"))[3] is False
        _, reward, terminated, truncated, info = env.step(tool_call("get_user_details", user_id="mia_li_3668"))
        assert (reward, terminated, truncated, info["termination_reason"]) == (0.0, False, True, "max_steps")
        assert "premature" in info["reward_detail"]["notes"]
        env.reset(seed=0)
        env.step(tool_call("get_user_details", user_id="nobody"))
        _, reward, terminated, truncated, info = env.step(tool_call("cancel_reservation", reservation_id="NOPE"))
        assert (reward, terminated, truncated, info["termination_reason"]) == (0.0, True, False, "too_many_errors")
        with pytest.raises(RuntimeError, match="call reset"):
            env.step("hello")
    finally:
        env.close()


def test_bad_target_options_fail_before_any_server_starts(tmp_path: Path) -> None:
    with pytest.raises(TargetConfigError, match="unknown target 'tau3-airline'; known: tau2-airline, tau2-retail, mcp"):
        TargetEnv("tau3-airline")
    with pytest.raises(TargetConfigError, match="unknown task id"):
        TargetEnv("tau2-airline", task_id="nope")
    with pytest.raises(TargetConfigError, match="needs a server"):
        TargetEnv("mcp", tasks=tmp_path / "t.json")
    if not native_available():
        with pytest.raises(TargetConfigError, match="backend 'native' needs"):
            TargetEnv("tau2-airline", backend="native")
