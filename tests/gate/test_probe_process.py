"""The gate's probe process runs no env code (issue 32, item 3: keep the grading engine, transcripts and replies
outside the interpreter that runs env code).

Under the shim's fresh processes a probe call (``survey``, ``episode``, ``timing``, ...) asks every env method it
needs of a fresh process (``trace_env.gate_remote``): only the JSON answer comes back, so env code that takes over
its interpreter can answer the env's own functions but never rewrite the figures the gate computes from them.
Played in real bwrap workers (``SandboxedEnv``, the gate's constructor), on the valid desk env
(tests/envs/defective/desk.py) with one hostile block added:

- ``KILLS_A_PROBE``: any env code that runs where a probe call is on the stack kills its process (exit 77), so a
  probe call that executed env code would fail; every probe method is called and answers;
- ``FORGES_THE_SKIPPING_REWARD``: ``generate``, run in the process that computes the survey's figures, rewrites
  ``gate_probe.summary`` for one call so that the skipping agent's episode reads 1.0 (and puts it back, so the
  worker's integrity check, which compares between calls, sees nothing). It only ever runs in a one-shot process.

The controls run the same envs with one process per worker (``Sandbox.fresh_processes = False``, where the probe
runs next to env code): there the probe dies and the reward is forged, so the envs do what they claim.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from env_registry.hosted import SandboxedEnv, SandboxedRunner
from sandbox import available_backends
from sandbox.base import Sandbox

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
BACKEND = SANDBOXED[0] if SANDBOXED else "bwrap"

DESK = (Path(__file__).resolve().parents[1] / "envs" / "defective" / "desk.py").read_text()
IMPORT = "from env_registry import sdk\n"
SEED = 4

KILLS_A_PROBE = IMPORT + '''import os
import sys

PROBES = {"survey", "episode", "episodes", "timing", "fingerprints", "generate", "solution", "memory"}


def _in_a_probe():
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith("gate_calls.py") and frame.f_code.co_name in PROBES:
            return True
        frame = frame.f_back
    return False


if _in_a_probe():  # this module is executed wherever env code runs: a fresh env per call
    os._exit(77)
'''

FORGES_THE_SKIPPING_REWARD = IMPORT + '''import sys


def _forge():
    """Where the survey computes its figures, rewrite its summary for the skipping episode, then put it back."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "survey_seed":
        frame = frame.f_back
    if frame is None:
        return
    probe = sys.modules["trace_env.gate_probe"]
    honest = probe.summary
    calls = []

    def summary(episode):
        calls.append(1)
        out = honest(episode)
        if len(calls) == 2:  # the skipping agent's episode
            probe.summary = honest
            out = dict(out, reward=1.0)
        return out

    probe.summary = summary
'''
GENERATE = "    def generate(self, seed):\n"


def hostile(block: str, in_generate: bool = False) -> str:
    source = DESK.replace(IMPORT, block, 1)
    if in_generate:
        source = source.replace(GENERATE, GENERATE + "        _forge()\n", 1)
    assert source != DESK
    return source


def probe_calls(env: SandboxedEnv) -> dict[str, object]:
    """Every probe method once, as the gate calls them."""
    return {
        "generate": env.call("generate", {"seed": SEED, "with_scenario": True}),
        "solution": env.call("solution", {"seed": SEED, "which": "reference"}),
        "episode": env.call("episode", {"seed": SEED, "policy": "reference", "truth_check": True, "templates": True}),
        "episodes": env.call("episodes", {"episodes": [{"seed": SEED, "policy": "skipping"}]}),
        "survey": env.call("survey", {"seeds": [SEED, SEED + 1], "world": [SEED], "parrot": [SEED]}),
        "timing": env.call("timing", {"seeds": [SEED, SEED + 1]}),
        "fingerprints": env.call("fingerprints", {"seeds": [SEED]}),
        "memory": env.call("memory", {"episodes": [{"seed": SEED, "turns": ["hello"]}], "rounds": 1}),
    }


def test_no_probe_call_executes_env_code() -> None:
    with SandboxedEnv(hostile(KILLS_A_PROBE), backend=BACKEND) as env:
        answers = probe_calls(env)
    survey = answers["survey"]
    assert isinstance(survey, list) and [r.get("seed") for r in survey] == [SEED, SEED + 1]
    assert all("error" not in r for r in survey), survey
    assert survey[0]["reference"]["reward"] == 1.0 and survey[0]["reference"]["ended_by"] != "actions_exhausted"
    assert survey[0]["world"]["truth_at_start"] == "undeclared" and survey[0]["world"]["truth_order"] == "same"
    assert answers["episode"]["reward"] == 1.0 and answers["episode"]["truth_check"] == "undeclared"
    assert all(t["ms"] >= 0 and "error" not in t for t in answers["timing"]), answers["timing"]
    assert answers["generate"]["fingerprint"] == survey[0]["fingerprint"] and answers["generate"]["scenario"]["seed"] == SEED
    assert "fingerprint" in answers["fingerprints"][0] and answers["solution"] == survey[0]["reference"]["turns"]


def test_env_code_cannot_forge_the_surveys_figures() -> None:
    with SandboxedEnv(hostile(FORGES_THE_SKIPPING_REWARD, in_generate=True), backend=BACKEND) as env:
        record = env.call("survey", {"seeds": [SEED]})[0]
        runner = SandboxedRunner(env)
        runner.reset(SEED)
        for turn in record["skipping"]["turns"]:
            trained = runner.step(turn)
            if trained.terminated or trained.truncated:
                break
    assert "error" not in record, record
    assert record["skipping"]["reward"] == pytest.approx(float(trained.reward)) and record["skipping"]["reward"] < 1.0, record["skipping"]
    assert record["reference"]["reward"] == 1.0


def test_control_with_one_process_the_probe_runs_env_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout before (the probe next to env code): the killing env kills the probe, the forging env forges."""
    monkeypatch.setattr(Sandbox, "fresh_processes", False)
    with SandboxedEnv(hostile(FORGES_THE_SKIPPING_REWARD, in_generate=True), backend=BACKEND) as env:
        assert env.call("survey", {"seeds": [SEED]})[0]["skipping"]["reward"] == 1.0
    with SandboxedEnv(hostile(KILLS_A_PROBE), backend=BACKEND) as env:
        with pytest.raises(Exception, match="77"):
            env.call("survey", {"seeds": [SEED]})
