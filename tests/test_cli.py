"""The ``factory`` CLI as a user meets it: build, envs list/show/remove, --json, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factory.cli import app
from factory.validation.gate import CHECK_NAMES

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_build_validates_then_registers_with_report(registry_root: Path) -> None:
    result = invoke("build", "--capability", "permission_error_recovery", "--sandbox", "bwrap")
    assert result.exit_code == 0, result.output
    assert "trace/permission_error_recovery-v0" in result.output
    assert "sandbox: bwrap" in result.output
    for check in ("static", "determinism", "grpo_signal", "capability_necessity"):
        assert check in result.output
    again = invoke("build", "--capability", "permission_error_recovery", "--sandbox", "bwrap", "--json")
    data = json.loads(again.stdout)
    assert data["gym_id"] == "trace/permission_error_recovery-v0" and data["new_version"] is False
    assert data["validation"] == "passed" and data["sandbox"] == "bwrap"
    stored = json.loads((registry_root / "permission_error_recovery" / "v0" / "report.json").read_text())
    assert stored["passed"] is True and [c["name"] for c in stored["checks"]] == CHECK_NAMES


def test_envs_list_show_remove(registry_root: Path) -> None:
    assert "No envs registered" in invoke("envs", "list").output
    invoke("build", "-c", "precondition_verification", "--set", "solvability_seeds=30")
    listed = json.loads(invoke("envs", "list", "--json").stdout)
    assert [e["gym_id"] for e in listed] == ["trace/precondition_verification-v0"]
    shown = invoke("envs", "show", "trace/precondition_verification-v0")
    assert shown.exit_code == 0 and "(verified)" in shown.output
    manifest = json.loads(invoke("envs", "show", "precondition_verification", "--json").stdout)
    assert manifest["target"] == "tau2-airline" and manifest["provenance"]["generator"] == "blueprint"
    assert invoke("envs", "remove", "precondition_verification").exit_code == 0
    assert json.loads(invoke("envs", "list", "--json").stdout) == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["build", "--capability", "telepathy"], "no built-in blueprint for 'telepathy'"),
        (["build", "-c", "precondition_verification", "--target", "mars"], "unknown target 'mars'"),
        (["build", "-c", "precondition_verification", "--target", "toolsandbox"], "targets 'tau2-airline', not 'toolsandbox'"),
        (["envs", "show", "nothing_here"], "no env capability 'nothing_here'"),
        (["build", "-c", "precondition_verification", "--sandbox", "vm"], "--sandbox 'vm' is not a backend"),
        (["build", "-c", "precondition_verification", "--set", "seeds"], "expected KEY=VALUE"),
        (["build", "-c", "precondition_verification", "--set", "grpo_seeds=-1"], "--set grpo_seeds=-1: -1 is out of range (allowed: 1 to 1000)"),
        (["validate", "missing_file.py"], "cannot read env file missing_file.py"),
    ],
)
def test_bad_input_gets_one_line_error(registry_root: Path, args: list[str], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def test_tampered_env_show_is_refused(registry_root: Path) -> None:
    invoke("build", "-c", "permission_error_recovery")
    source = registry_root / "permission_error_recovery" / "v0" / "env.py"
    source.write_text(source.read_text() + "\n# injected\n")
    result = invoke("envs", "show", "permission_error_recovery")
    assert result.exit_code == 2 and "fails its content-hash check" in result.output


def test_two_concurrent_build_processes_keep_registry_consistent(tmp_path: Path) -> None:
    env = {**os.environ, "TRACE_FACTORY_REGISTRY": str(tmp_path)}
    names = ["permission_error_recovery", "datetime_reasoning"] * 2
    procs = [
        subprocess.Popen([sys.executable, "-m", "factory.cli", "build", "-c", name, "--json"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name in names
    ]
    outputs = [p.communicate(timeout=900) for p in procs]  # four whole gates at once, each episode a fresh process
    assert all(p.returncode == 0 for p in procs), [(p.returncode, err[-500:], out[-1500:]) for p, (out, err) in zip(procs, outputs)]
    ids = sorted(json.loads(out)["gym_id"] for out, _ in outputs)
    assert ids == ["trace/datetime_reasoning-v0"] * 2 + ["trace/permission_error_recovery-v0"] * 2
    check = subprocess.run(
        [sys.executable, "-c", "import gymnasium as gym, env_registry; e = gym.make('trace/datetime_reasoning-v0'); "
         "e2 = gym.make('trace/permission_error_recovery-v0'); print(e.reset(seed=1)[0][:8], e2.reset(seed=1)[0][:8])"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert check.returncode == 0, check.stderr
    assert check.stdout.split() == ["[system]", "[system]"]


def test_validate_command_on_file_and_registered_env(registry_root: Path, tmp_path: Path) -> None:
    from tests.conftest import TEST_ENVS

    report_path = tmp_path / "out" / "report.json"
    checked = TEST_ENVS.parent / "gate" / "envs" / "tiny_checked.py"  # tiny_cancel.py has a reward hole the gate finds
    result = invoke("validate", str(checked), "--sandbox", "bwrap", "--report", str(report_path))
    assert result.exit_code == 0, result.output
    assert "PASSED" in result.output
    assert json.loads(report_path.read_text())["passed"] is True
    broken = tmp_path / "broken.py"
    broken.write_text(checked.read_text().replace("max_steps = 6", "max_steps = 10**6"))
    failed = invoke("validate", str(broken), "--sandbox", "bwrap", "--json")
    assert failed.exit_code == 1
    data = json.loads(failed.stdout)
    assert data["passed"] is False and [c["name"] for c in data["checks"] if not c["passed"]] == ["robustness"]
    invoke("build", "-c", "datetime_reasoning", "--sandbox", "bwrap")
    registered = invoke("validate", "trace/datetime_reasoning-v0", "--sandbox", "bwrap", "--set", "solvability_seeds=20")
    assert registered.exit_code == 0, registered.output


def test_unsafe_backend_is_loudly_labelled(registry_root: Path, tmp_path: Path) -> None:
    from tests.conftest import TEST_ENVS

    result = invoke("validate", str(TEST_ENVS / "tiny_cancel.py"), "--sandbox", "unsafe-subprocess", "--json")
    data = json.loads(result.stdout)
    assert "UNSANDBOXED" in (data["backend_warning"] or "")
    human = invoke("validate", str(TEST_ENVS / "tiny_cancel.py"), "--sandbox", "unsafe-subprocess")
    assert "WARNING" in human.output and "UNSANDBOXED" in human.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["build", "--bogus"], "No such option: --bogus"),
        (["build", "-c"], "Option '-c' requires an argument"),
        (["build", "-c", "x", "--max-attempts", "0"], "Invalid value for '--max-attempts'"),
    ],
)
def test_usage_errors_from_the_real_entry_point_are_one_line(args: list[str], message: str) -> None:
    result = subprocess.run([sys.executable, "-m", "factory.cli", *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1
