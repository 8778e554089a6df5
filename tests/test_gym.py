"""Gymnasium face: registration on import, both gym.make spellings, spaces, check_env, trust policy."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from gymnasium.utils.env_checker import check_env

from env_registry.gym_env import TraceEnv
from trace_env.loader import load_env
from env_registry.registry import Registry
from trace_env.engine import EpisodeRunner
from env_registry.spaces import AnyText


def run_python(code: str, root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "TRACE_FACTORY_UNSAFE_INPROCESS"}
    environment.update(TRACE_FACTORY_REGISTRY=str(root), **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120)


def register_tiny(root: Path, source: str) -> None:
    env = load_env(source)
    Registry(root).put(source, capability=env.capability, target=env.target, tools=env.tools(), max_steps=env.max_steps)


def test_any_text_space_accepts_real_text() -> None:
    space = AnyText(50)
    assert space.contains("") and space.contains('{"a": [1, 2]}\n€ 日本') and not space.contains("x" * 51)
    assert not space.contains(b"bytes")
    assert space.contains(space.sample())


def test_check_env_passes_without_warnings(tiny_source: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(TraceEnv(runner=EpisodeRunner(load_env(tiny_source))), skip_render_check=True)


MAKES = [
    "import gymnasium as gym, env_registry; e = gym.make('trace/tiny_cancel-v0')",
    "import gymnasium as gym; e = gym.make('env_registry:trace/tiny_cancel-v0')",
]
EPISODE = "\nobs, info = e.reset(seed=1)\nprint(obs[:8]); print(sorted(info)[:3]); print(e.step('hello')[2]); e.close()"


@pytest.mark.parametrize("make", MAKES)
def test_gym_make_both_spellings_run_env_in_sandbox(tmp_path: Path, tiny_source: str, make: str) -> None:
    register_tiny(tmp_path, tiny_source)
    code = make + EPISODE + "\nimport sys; print(type(e.unwrapped.runner).__name__, 'tiny_cancel' in sys.modules.get('trace_env_tiny_cancel_v0', sys).__name__)"
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[system]", "['capability', 'max_steps', 'messages']", "True", "SandboxedRunner False"]
    assert "UNSANDBOXED" not in result.stderr


def test_unsafe_in_process_opt_in_is_loud(tmp_path: Path, tiny_source: str) -> None:
    register_tiny(tmp_path, tiny_source)
    result = run_python(MAKES[0] + EPISODE + "\nprint(type(e.unwrapped.runner).__name__)", tmp_path, TRACE_FACTORY_UNSAFE_INPROCESS="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "EpisodeRunner"
    assert "UNSANDBOXED" in result.stderr


def test_tampered_env_is_refused_by_gym_make(tmp_path: Path, tiny_source: str) -> None:
    register_tiny(tmp_path, tiny_source)
    env_file = tmp_path / "tiny_cancel" / "v0" / "env.py"
    env_file.write_text(env_file.read_text() + "\n# injected\n")
    result = run_python(MAKES[0], tmp_path)
    assert result.returncode != 0
    assert "fails its content-hash check" in result.stderr


def test_broken_registry_does_not_break_import(tmp_path: Path, tiny_source: str) -> None:
    """Import registers from folder names only; making the broken env says what is wrong and how to fix it."""
    register_tiny(tmp_path, tiny_source)
    (tmp_path / "tiny_cancel" / "v0" / "manifest.json").write_text("garbage")
    code = (
        "import gymnasium as gym, env_registry\n"
        "print([k for k in gym.registry if k.startswith('trace/')])\n"
        "try:\n    gym.make('trace/tiny_cancel-v0')\nexcept env_registry.RegistryError as exc:\n    print(exc)"
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    listed, problem = result.stdout.strip().splitlines()
    assert listed == "['trace/tiny_cancel-v0']"
    assert "trace/tiny_cancel-v0 is broken" in problem and "corrupt manifest" in problem
    assert "factory envs remove tiny_cancel --version 0" in problem
