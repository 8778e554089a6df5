"""Every name is checked before any expensive work (issue 23): one capability slug rule for the gate, build, the
registry, gym ids and adapters; policies, users, judges and models named wrongly are said to be so at once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factory.cli import app
from schemas.names import capability_problem, is_capability_name
from tests.ops.conftest import FAST_GATE, TINY, factory_env, put, run_factory

BAD_NAMES = ["../../x", "", "a" * 300, "Bad", "x", "abc\n", "a-b", "trace/x-v0"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_one_rule_refuses_unsafe_names_everywhere(name: str, tmp_path: Path) -> None:
    from env_registry.registry import Registry, RegistryError
    from router.errors import AdapterError
    from router.loading import parse_adapter_flags
    from schemas.capability import Capability
    from schemas.manifest import EnvManifest

    assert not is_capability_name(name)
    problem = capability_problem(name)
    assert problem is not None and "is not a capability name" in problem and len(problem) < 200  # 300 chars are shortened
    with pytest.raises(RegistryError, match="is not a capability name"):
        Registry(tmp_path).get(name)
    with pytest.raises(ValueError):
        EnvManifest(capability=name, target="tau2-airline", version=0, max_steps=1, tools=[], source_sha256="0" * 64)
    with pytest.raises(ValueError):
        Capability(name=name, description="d")
    if name and "=" not in name:
        with pytest.raises(AdapterError, match="is not a capability name"):
            parse_adapter_flags([f"{name}={tmp_path}"])
    assert is_capability_name("precondition_verification") and capability_problem("tiny_cancel") is None


def test_validate_refuses_an_env_that_declares_an_unsafe_capability_before_the_gate(tmp_path: Path) -> None:
    path = tmp_path / "escape.py"
    path.write_text(TINY.replace('capability = "tiny_cancel"', 'capability = "../../x"'))
    ran = run_factory("validate", str(path), "--sandbox", "bwrap", "--json", *FAST_GATE)
    assert ran.code == 2 and ran.stdout == "", ran.stderr[-1500:]  # bad input, said before any sandbox starts
    assert "declares a bad capability: '../../x' is not a capability name" in ran.lines[-1]


def test_build_refuses_an_unsafe_capability_before_the_gate(tmp_path: Path) -> None:
    started = time.monotonic()
    result = CliRunner().invoke(app, ["build", "--capability", "../../x", "--registry", str(tmp_path / "r")])
    assert result.exit_code == 2 and "--capability '../../x' is not a capability name" in result.output
    assert time.monotonic() - started < 10 and not (tmp_path / "r").exists()


def test_an_empty_version_folder_is_not_registered_with_gymnasium(tmp_path: Path) -> None:
    root = tmp_path / "registry"
    put(root, "sound_one")
    (root / "hollow_one" / "v0").mkdir(parents=True)  # a stray mkdir: no files at all
    (root / "half_one" / "v0").mkdir(parents=True)
    (root / "half_one" / "v0" / "env.py").write_text(TINY)  # damaged, not empty: registered so gym.make explains it
    code = ("import gymnasium as gym, env_registry\n"
            "print(sorted(k for k in gym.registry if k.startswith('trace/')))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=factory_env(TRACE_FACTORY_REGISTRY=str(root)))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['trace/half_one-v0', 'trace/sound_one-v0']"


@pytest.mark.parametrize(
    "flag, value, words",
    [
        ("--policy", "bogus", "--policy 'bogus' is not a policy: use scripted:gold"),
        ("--user", "bogus", "--user 'bogus' is not a simulated user"),
        ("--judge", "bogus", "--judge 'bogus' is not a judge"),
        ("--policy", "scripted:perfect", "unknown scripted policy"),
        ("--policy", "hf:/no/such/model", "--policy hf:/no/such/model: no such folder"),
    ],
)
def test_policies_users_and_judges_are_named_wrongly_not_missing_a_key(flag: str, value: str, words: str, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    base = ["rollout", "--target", "tau2-airline", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, base + (["--policy", value] if flag == "--policy" else ["--policy", "scripted:gold", flag, value]))
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert words in text and "OPENAI_API_KEY" not in text
    assert not (tmp_path / "out").exists()  # refused before the output folder or a target server existed


def test_a_known_provider_without_its_key_is_still_said_plainly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = CliRunner().invoke(app, ["rollout", "--target", "tau2-airline", "--policy", "openai:gpt-4.1", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "OPENAI_API_KEY is not set" in result.output


@pytest.mark.parametrize("offline", [False, True])
def test_a_model_that_is_neither_a_folder_nor_cached_fails_in_seconds_with_the_offline_hint(tmp_path: Path, offline: bool) -> None:
    root = tmp_path / "registry"
    put(root)
    env = {"TRACE_FACTORY_REGISTRY": str(root), "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1" if offline else "0",
           "HF_ENDPOINT": "http://127.0.0.1:9"}  # nothing listens there: the hub is unreachable, as on an offline host
    started = time.monotonic()
    ran = run_factory("train", "tiny_cancel", "--model", "some-org/some-model", "--output", str(tmp_path / "run"), **env)
    assert ran.code == 2 and time.monotonic() - started < 30, ran.stderr
    line = ran.lines[-1]
    assert "--model some-org/some-model: not a local folder and not in the Hugging Face cache" in line
    assert ("HF_HUB_OFFLINE is set" if offline else "cannot be reached") in line and "huggingface-cli download some-org/some-model" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("what", ["missing folder", "a file", "output under a file"])
def test_models_and_output_folders_are_checked_before_the_model_loads(tmp_path: Path, tiny_model: Path, what: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    root = tmp_path / "registry"
    put(root)
    monkeypatch.setenv("TRACE_FACTORY_REGISTRY", str(root))  # restored after: `train` exports it for gym
    (tmp_path / "file").write_text("")
    model, output, words = {
        "missing folder": (str(tmp_path / "nope"), str(tmp_path / "run"), f"--model {tmp_path / 'nope'}: no such folder"),
        "a file": (str(tmp_path / "file"), str(tmp_path / "run"), "not a folder; pass a model folder"),
        "output under a file": (str(tiny_model), str(tmp_path / "file" / "run"), "cannot use run folder"),
    }[what]
    result = CliRunner().invoke(app, ["train", "tiny_cancel", "--model", model, "--output", output])
    assert result.exit_code == 2 and words in " ".join(result.output.split()), result.output
