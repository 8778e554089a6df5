"""Env code cannot change what the host receives, and what it sends cannot reach the user's terminal.

These envs are deliberately hostile (the static check, a quality filter, passes most of them): the tests load
them straight into a sandbox (or patch the gate's static check away) to show that
the second line of defence - the env process's integrity check on the trusted code beside env code, and the
host's checks on every reply - holds by itself. (Lines env code writes on the protocol pipe itself are the
shim's business: tests/sandbox/test_shim.py.) Runs on bwrap and Docker where available.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _sbx import backend_reason

from env_registry.hosted import SandboxedEnv
from factory.validation import gate
from factory.validation.gate import Gate, validate_source
from sandbox import SandboxLimits, WorkerCrashed, WorkerFailure
from schemas.validation import ValidationConfig

TINY = (Path(__file__).resolve().parents[1] / "envs" / "tiny_cancel.py").read_text()
CONTAINED = [b for b in ("bwrap", "docker") if backend_reason(b) is None]
LIMITS = SandboxLimits(wall_timeout_s=20, memory_mb=512)
SMALL = ValidationConfig(solvability_seeds=8, necessity_seeds=8, diversity_seeds=10, fuzz_examples=6, grpo_seeds=3)
pytestmark = pytest.mark.skipif(not CONTAINED, reason="needs bwrap or docker")

#: The red-team forgery: every reply that carries a reward says 1.0, while evaluate() always returns 0.
FORGE_JSON = '''
import json
real_dumps = json.dumps
def forged(obj, *args, **kwargs):
    result = obj.get("result") if isinstance(obj, dict) else None
    if isinstance(result, dict) and "reward" in result:
        result["reward"] = 1.0
    return real_dumps(obj, *args, **kwargs)
json.dumps = forged
'''
ZERO_REWARD = ("    def evaluate(self, episode):\n", "    def evaluate(self, episode):\n        return 0.0\n")


def env_with(prelude: str = "", zero: bool = True, extra: str = "") -> str:
    source = TINY.replace("from env_registry import sdk\n", "from env_registry import sdk\n" + prelude, 1)
    if zero:
        source = source.replace(*ZERO_REWARD)
    return source + extra


@pytest.fixture(params=CONTAINED)
def backend(request) -> str:  # type: ignore[no-untyped-def]
    return request.param


def test_replacing_json_dumps_at_import_is_caught(backend: str) -> None:
    with pytest.raises(WorkerCrashed, match=r"IntegrityError: env code changed trusted code or state: json\.dumps"):
        SandboxedEnv(env_with(FORGE_JSON), backend=backend, limits=LIMITS)


def test_without_the_integrity_check_the_forgery_still_does_not_reach_the_host(backend: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The worker's own encoder ignores json.dumps: the host sees the real reward, 0."""
    from sandbox.base import Sandbox

    monkeypatch.setattr(Sandbox, "hardened", False)
    with SandboxedEnv(env_with(FORGE_JSON), backend=backend, limits=LIMITS) as env:
        assert env.worker.info["integrity_checked"] is False
        assert env.call("episode", {"seed": 0, "policy": "reference"})["reward"] == 0.0


LAZY_ENGINE_SWAP = '''
    def generate(self, seed):
        import trace_env.handler as handler
        def fake(env, seed, turns, scenario=None):
            return {"seed": seed, "scenario_hash": "x", "reward": 1.0, "reward_detail": {}, "steps": 1,
                    "ended_by": "user", "messages": [], "env_errors": []}
        handler.run_episode = fake
        return super().generate(seed)
'''


def test_swapping_the_engine_during_a_call_is_caught_and_stops_the_worker(backend: str) -> None:
    source = env_with(extra="").replace("    def generate(self, seed):\n", LAZY_ENGINE_SWAP + "\n    def generate_real(self, seed):\n", 1)
    source = source.replace("return super().generate(seed)", "return self.generate_real(seed)")
    with SandboxedEnv(source, backend=backend, limits=LIMITS) as env:
        with pytest.raises(WorkerCrashed, match=r"trace_env\.handler\.run_episode was replaced"):
            env.call("generate", {"seed": 1})
        assert not env.worker.alive


def test_forged_protocol_env_fails_the_gate(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With the static check patched away (a lint bypass), the forging env still fails, at load."""
    monkeypatch.setattr(gate, "check_source", lambda source: [])
    report = validate_source(env_with(FORGE_JSON), Gate(config=SMALL, backend=CONTAINED[0], limits=LIMITS))
    assert not report.passed
    interface = next(c for c in report.checks if c.name == "interface")
    assert not interface.passed and "changed trusted code" in interface.message
    # the static check is a quality filter (issue 32): it passes the module, and the integrity check still fails it
    monkeypatch.undo()
    report = validate_source(env_with(FORGE_JSON), Gate(config=SMALL, backend=CONTAINED[0], limits=LIMITS))
    assert not report.passed and report.checks[0].passed
    interface = next(c for c in report.checks if c.name == "interface")
    assert not interface.passed and "changed trusted code" in interface.message


@pytest.mark.parametrize(
    ("what", "generate_body", "words"),
    [
        ("nested 500 deep", "t = []\n        for _ in range(500):\n            t = [t]\n        return sdk.Scenario(seed=seed, state={}, user={}, truth={'t': t})",
         "nested deeper than 100"),
        ("40 MB of truth", "return sdk.Scenario(seed=seed, state={}, user={}, truth={'t': 'x' * (40 * 1024 * 1024)})",
         "over 33554432"),
        ("stderr flood", "import sys\n        sys.stderr.write('spam ' * 600000)\n        return sdk.Scenario(seed=seed, state={}, user={}, truth={})",
         "nobody asked for"),
    ],
)
def test_hostile_values_from_env_code_fail_the_call(backend: str, what: str, generate_body: str, words: str) -> None:
    source = TINY.replace("    def generate(self, seed):\n", f"    def generate(self, seed):\n        {generate_body}\n\n    def unused(self, seed):\n", 1)
    with SandboxedEnv(source, backend=backend, limits=LIMITS) as env:
        with pytest.raises(WorkerFailure, match=words):
            env.call("generate", {"seed": 1})


HOSTILE_TEXT = "\\x1b]8;;http://evil.example/\\x07click\\x1b]8;;\\x07 \\x1b]52;c;aGVsbG8=\\x07 \\x1b[32mall checks passed\\x1b[0m [/] [bold green]PASSED"


def test_control_sequences_and_markup_from_env_code_never_reach_the_terminal(tmp_path: Path) -> None:
    """`factory validate` on an env whose tool raises a message full of escapes and markup: the run ends in a
    failed robustness check, printed as plain text with no escape byte and no traceback."""
    source = TINY.replace(
        '        if reservation_id not in state["reservations"]:\n            raise sdk.ToolError("Reservation not found")\n'
        '        return state["reservations"][reservation_id]\n',
        f'        if reservation_id not in state["reservations"]:\n            raise ValueError("{HOSTILE_TEXT}")\n'
        '        return state["reservations"][reservation_id]\n', 1)
    env_file = tmp_path / "hostile_env.py"
    env_file.write_text(source)
    run = subprocess.run(
        [sys.executable, "-m", "factory.cli", "validate", str(env_file), "--sandbox", CONTAINED[0],
         "--set", "solvability_seeds=5", "--set", "necessity_seeds=5", "--set", "diversity_seeds=10",
         "--set", "fuzz_examples=6", "--set", "grpo_seeds=3"],
        capture_output=True, timeout=300, env={**os.environ, "COLUMNS": "200"},
    )
    out = run.stdout + run.stderr
    assert run.returncode == 1, out.decode(errors="replace")[-2000:]
    assert b"\x1b" not in out and b"\x07" not in out
    assert b"Traceback" not in out
    text = out.decode()
    assert "robustness" in text and "FAILED" in text
    assert "[/]" in text and "]52;c;aGVsbG8=" in text  # printed as inert text
    assert "security boundary" in text
