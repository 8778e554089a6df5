"""The optional calibration check: is the env at the right difficulty for the policy that will train on it?

As in the paper's released code: roll the base policy out K times on each of a few seeds; the env is well
calibrated when the policy's mean reward and success rate are both in [0.2, 0.6] and at least half of the
groups have reward variance (too easy or too hard gives GRPO nothing to learn from). The policy is any
callable, or an OpenAI-compatible endpoint driven through ``llm_clients``.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable

from pydantic import BaseModel, Field

from env_registry.hosted import SandboxedEnv, SandboxedRunner
from env_registry.policy import Policy, PolicyContext
from llm_clients import LLMError
from schemas.validation import CheckResult, Counterexample


class CalibrationConfig(BaseModel):
    seeds: int = Field(8, ge=1)
    group_size: int = Field(4, ge=2)
    low: float = 0.2
    high: float = 0.6
    min_informative_share: float = 0.5
    success_reward: float = Field(0.99, description="a rollout counts as a success at or above this reward")


def run_calibration(hosted: SandboxedEnv, policy: Policy | Callable[..., Any], config: CalibrationConfig | None = None, first_seed: int = 0) -> CheckResult:
    """Roll ``policy`` out in the sandboxed env and grade the env's difficulty for it (a non-required check)."""
    config = config or CalibrationConfig()
    started = time.perf_counter()
    runner = SandboxedRunner(hosted)
    rewards_by_seed: dict[int, list[float]] = {}
    try:
        for seed in range(first_seed, first_seed + config.seeds):
            rewards_by_seed[seed] = [_rollout(runner, policy, seed, k) for k in range(config.group_size)]
    except LLMError as exc:
        return CheckResult(name="calibration", passed=False, required=False, figure="policy failed",
                           message=f"the policy endpoint failed: {exc}", seconds=round(time.perf_counter() - started, 3))
    rewards = [r for group in rewards_by_seed.values() for r in group]
    if not all(math.isfinite(r) for r in rewards):  # reward_bounds reports it; calibration cannot grade on NaN
        return CheckResult(name="calibration", passed=False, required=False, figure="non-finite rewards",
                           message="the env returned non-finite rewards to the base policy; see reward_bounds",
                           seconds=round(time.perf_counter() - started, 3))
    mean = statistics.fmean(rewards)
    success = sum(r >= config.success_reward for r in rewards) / len(rewards)
    informative = sum(statistics.pstdev(group) > 1e-9 for group in rewards_by_seed.values()) / len(rewards_by_seed)
    problems = []
    if not config.low <= mean <= config.high:
        problems.append(f"mean reward {mean:.2f} outside [{config.low}, {config.high}]")
    if not config.low <= success <= config.high:
        problems.append(f"success rate {success:.2f} outside [{config.low}, {config.high}]")
    if informative < config.min_informative_share:
        problems.append(f"only {informative:.0%} of groups have reward variance")
    if mean > config.high or success > config.high:
        problems.append("the env is too easy for this policy: make scenarios harder")
    elif mean < config.low or success < config.low:
        problems.append("the env is too hard for this policy: simplify or add partial credit")
    flat = next((seed for seed, group in rewards_by_seed.items() if statistics.pstdev(group) <= 1e-9), None)
    return CheckResult(
        name="calibration",
        passed=not problems,
        required=False,
        figure=f"base policy: mean reward {mean:.2f}, success {success:.0%}, informative groups {informative:.0%} "
        f"({config.seeds} seeds x K={config.group_size})",
        message="; ".join(problems),
        counterexample=None if not problems or flat is None else Counterexample(seed=flat, detail="a group with no reward variance"),
        seconds=round(time.perf_counter() - started, 3),
    )


def _rollout(runner: SandboxedRunner, policy: Callable[..., Any], seed: int, rollout: int) -> float:
    first = runner.reset(seed)
    messages = list(first.info["messages"])
    tools = first.info["tools"]
    for step in range(int(first.info["max_steps"])):
        action = policy(messages, tools, PolicyContext(seed=seed, rollout=rollout, step=step))
        result = runner.step(action)
        if result.terminated or result.truncated:
            return float(result.reward)
        messages.append(result.info["assistant_message"])
        messages.extend(result.info["new_messages"])
    return 0.0
