"""The optional calibration check: a base policy's mean reward and success rate must sit in [0.2, 0.6]."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from trace_env.loader import load_env
from env_registry.hosted import SandboxedEnv
from llm_clients import make_client, parse_llm_spec
from factory.testing.llm_server import RecordedRequest, ScriptedLLMServer
from env_registry.policy import PolicyContext, llm_policy
from factory.validation.calibration import CalibrationConfig, run_calibration
from factory.validation.gate import Gate, validate_source
from sandbox import available_backends
from schemas.validation import ValidationConfig

BACKEND = "bwrap" if available_backends().get("bwrap") is None else "docker"
pytestmark = pytest.mark.skipif(available_backends().get(BACKEND) is not None, reason="no sandbox backend available")


def mixture_policy(source: str, p_reference: float):
    """Plays the reference solution with probability p per rollout, else the capability-skipping one."""
    env = load_env(source)  # test code, trusted: only used to compute the two solutions

    def act(messages, tools, context: PolicyContext):
        good = random.Random(f"{context.seed}:{context.rollout}").random() < p_reference
        scenario = env.generate(context.seed)
        turns = env.reference_solution(scenario) if good else env.capability_skipping_solution(scenario)
        return turns[min(context.step, len(turns) - 1)]

    return act


def test_well_calibrated_policy_passes(tiny_source: str) -> None:
    with SandboxedEnv(tiny_source, backend=BACKEND) as hosted:
        result = run_calibration(hosted, mixture_policy(tiny_source, 0.35), CalibrationConfig(seeds=10, group_size=6))
    assert result.passed, result
    assert not result.required
    assert "mean reward" in result.figure and "informative groups" in result.figure


def test_too_easy_env_is_reported(tiny_source: str) -> None:
    with SandboxedEnv(tiny_source, backend=BACKEND) as hosted:
        result = run_calibration(hosted, mixture_policy(tiny_source, 1.0), CalibrationConfig(seeds=4, group_size=3))
    assert not result.passed
    assert "too easy" in result.message and "success rate 1.00 outside" in result.message


def test_llm_endpoint_policy_through_the_gate(checked_source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scripted OpenAI-compatible endpoint plays the tiny env: it asks for the id, looks it up, then cancels
    every other time, so groups have variance; calibration is reported but never decides the verdict."""
    monkeypatch.setenv("TRACE_FACTORY_CACHE", str(tmp_path / "cache"))
    counter = {"n": 0}

    def reply(request: RecordedRequest) -> str:
        messages = request.body["messages"]
        last = messages[-1]["content"]
        if "<tool_response" in last:
            rid = re.search(r'"reservation_id": "(\w+)"', last).group(1)
            counter["n"] += 1
            if counter["n"] % 2:
                return f'<tool_call>{{"name": "cancel_reservation", "arguments": {{"reservation_id": "{rid}"}}}}</tool_call>'
            return "This reservation cannot be cancelled, sorry."
        if last.startswith("It is "):
            rid = last.removeprefix("It is ").rstrip(".")
            return f'<tool_call>{json.dumps({"name": "get_reservation_details", "arguments": {"reservation_id": rid}})}</tool_call>'
        if messages[-2]["role"] == "assistant" and "cancel_reservation" in messages[-2]["content"]:
            return "Your reservation is cancelled."
        return "Could you tell me your reservation number?"

    with ScriptedLLMServer(reply) as server:
        policy = llm_policy(make_client(parse_llm_spec("vllm:tiny-policy", base_url=server.openai_base_url), cache=False))
        report = validate_source(
            checked_source, Gate(config=ValidationConfig(solvability_seeds=20, necessity_seeds=20, diversity_seeds=40, fuzz_examples=10), backend=BACKEND, calibration_policy=policy, calibration=CalibrationConfig(seeds=4, group_size=4)),
        )
    calibration = next(c for c in report.checks if c.name == "calibration")
    assert calibration.required is False and "4 seeds x K=4" in calibration.figure
    assert report.passed  # required checks decide; calibration is advisory
    assert len(server.requests) >= 4 * 4 * 2
    system = server.requests[0].body["messages"][0]["content"]
    assert "<tool_call>" in system and "cancel_reservation" in system
