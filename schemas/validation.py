"""Validation configuration and reports: what the gate checked, the figure it measured, and why it failed.

Also the records that come back from the sandbox while the gate runs (a seed's survey, an episode's
summary, a memory probe): env code produced them, so they are validated here before any check reads them.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, ValidatorFunctionWrapHandler, field_validator
from pydantic_core import PydanticCustomError

_BOUND_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}


def allowed_range(field: Any) -> str:
    """The bounds a field declares, written as a reader would: ``0 to 1``, ``more than 0, at most 3600``."""
    low = high = None
    low_open = high_open = False
    for item in field.metadata:
        if getattr(item, "ge", None) is not None:
            low = item.ge
        if getattr(item, "gt", None) is not None:
            low, low_open = item.gt, True
        if getattr(item, "le", None) is not None:
            high = item.le
        if getattr(item, "lt", None) is not None:
            high, high_open = item.lt, True
    if low is not None and high is not None:
        if not low_open and not high_open:
            return f"{low} to {high}"
        return f"{'more than' if low_open else 'at least'} {low}, {'less than' if high_open else 'at most'} {high}"
    if low is not None:
        return f"{'more than' if low_open else 'at least'} {low}"
    if high is not None:
        return f"{'less than' if high_open else 'at most'} {high}"
    return "any value"


class ValidationConfig(BaseModel):
    """Thresholds of the validation gate; every one can be overridden (``--set key=value``) within its range."""

    model_config = ConfigDict(allow_inf_nan=False)

    solvability_seeds: int = Field(128, ge=1, le=10_000, description="seeds whose reference solution is played")
    solvability_min_reward: float = Field(0.99, ge=0, le=1)
    solvability_min_share: float = Field(
        1.0, ge=0, le=1, description="share of seeds the reference must solve: an oracle that fails a seed means a broken seed"
    )
    necessity_seeds: int = Field(128, ge=1, le=10_000, description="seeds whose capability-skipping solution is played")
    necessity_max_reward: float = Field(0.5, ge=0, le=1)
    necessity_min_share: float = Field(0.90, ge=0, le=1)
    leak_seeds: int = Field(20, ge=0, le=10_000, description="seeds on which a first-message-only agent is played")
    diversity_seeds: int = Field(100, ge=2, le=10_000)
    diversity_min_share: float = Field(0.95, ge=0, le=1, description="distinct scenarios among the seeds")
    diversity_min_masked: int = Field(2, ge=1, le=10_000, description="distinct scenarios once ids and names are masked")
    diversity_min_patterns: int = Field(
        2, ge=1, le=10_000,
        description="distinct reference decisions: calls with their arguments, state changes and yes/no answers, ids and names masked",
    )
    determinism_seeds: int = Field(16, ge=1, le=1_000, description="seeds replayed in a second worker with another hash seed")
    determinism_sweep_seeds: int = Field(1024, ge=0, le=100_000, description="seeds whose generate() is compared between "
                                         "three workers with different hash seeds (each stops after determinism_sweep_s)")
    determinism_sweep_s: float = Field(0.25, gt=0, le=60, description="time each worker spends on the sweep at most")
    world_seeds: int = Field(16, ge=0, le=1_000, description="seeds whose reference is replayed with the target kit's tools and whose state is checked against the world's invariants")
    truth_seeds: int = Field(32, ge=0, le=1_000, description="seeds whose truth is recomputed (derive_truth) after the reference's reads")
    paraphrase_seeds: int = Field(12, ge=0, le=1_000, description="seeds whose reference is played reworded and with reads reordered")
    paraphrase_tolerance: float = Field(0.02, ge=0, le=1, description="how far (share of the reward range) a reworded reference may fall")
    paraphrase_min_share: float = Field(0.9, ge=0, le=1, description="share of reworded references that must keep the reward")
    exploit_seeds: int = Field(10, ge=1, le=1_000, description="seeds every degenerate policy and reference mutation is played on")
    exploit_confirm_seeds: int = Field(20, ge=0, le=1_000, description="further seeds the closest exploits are played on before a verdict")
    max_seeds: int = Field(256, ge=1, le=100_000, description="the most seeds the exploit search draws for a figure whose "
                           "confidence interval still straddles its threshold (then the verdict is inconclusive)")
    search_policies: bool = Field(False, description="also run the optimizing exploit search (composed policies; "
                                  "factory.validation.checks.search); off by default until its verdict holds across run seeds")
    exploit_max_share: float = Field(0.5, ge=0, le=1, description="highest mean reward a degenerate policy may reach, as a share of the reference's")
    exploit_max_match_share: float = Field(
        0.1, ge=0, le=1, description="share of seeds on which an exploit may match the reference's reward (within exploit_min_drop)"
    )
    exploit_min_drop: float = Field(0.01, gt=0, le=1, description="how far below the reference (share of the reward range) counts as lower")
    user_path_seeds: int = Field(4, ge=0, le=1_000, description="seeds on which the simulated user is driven down its other paths")
    observation_max_chars: int = Field(50_000, ge=1_000, le=10_000_000, description="longest observation one step may return")
    sensitivity_seeds: int = Field(8, ge=1, le=1_000, description="seeds whose reference solution is mutated")
    sensitivity_min_drop: float = Field(0.1, gt=0, le=1, description="how far a mutant's reward must fall below the reference's")
    sensitivity_min_share: float = Field(0.75, ge=0, le=1, description="share of seeds on which each kind of mutant must fall")
    grpo_seeds: int = Field(16, ge=1, le=1_000)
    grpo_group_size: int = Field(8, ge=2, le=256)
    grpo_min_informative_share: float = Field(0.5, ge=0, le=1)
    grpo_min_spread: float = Field(0.05, ge=0, le=1, description="reward std a group needs to count as informative")
    grpo_max_success_share: float = Field(
        0.75, ge=0, le=1, description="share of mixture rollouts that may already reach the solvability reward (saturation)"
    )
    fuzz_examples: int = Field(60, ge=1, le=10_000, description="Hypothesis examples per fuzzing check")
    load_timeout_s: float = Field(5.0, gt=0, le=3_600)
    reset_budget_ms: float = Field(
        200.0, gt=0, le=600_000, description="ms of generate + reset (wall time less waiting for a CPU), judged at the 95th percentile"
    )
    step_budget_ms: float = Field(100.0, gt=0, le=600_000, description="ms of one step (wall time less waiting for a CPU), judged at the 95th percentile")
    generate_timing_seeds: int = Field(32, ge=0, le=100_000, description="seeds generate() is timed on uncached (stops at the first slow one)")
    budget_max_factor: float = Field(5.0, ge=1, le=1_000, description="no single call may take more than this times its budget")
    budget_confirmed_factor: float = Field(2.0, ge=1, le=1_000, description="a call over this times its budget that is "
                                           "as slow when re-timed fails the budget check (slow on some arguments, not a stray pause)")
    max_steps_limit: int = Field(100, ge=1, le=10_000, description="longest episode an env may declare")
    memory_budget_mb: int = Field(512, ge=16, le=1_048_576, description="worker memory, now and projected")
    memory_projection_episodes: int = Field(
        100_000, ge=1, le=10**9, description="episodes one worker may serve in training: growth per episode is projected this far"
    )
    rpc_timeout_s: float = Field(20.0, gt=0, le=3_600, description="time one call to a worker may take, in the env's own "
                                 "time (wall time less waiting for a CPU or being stopped): more is a hang")
    starved_wait_s: float = Field(300.0, ge=0, le=86_400, description="wall time past a call's limit the gate waits for an "
                                  "env that gets (almost) no CPU (a starved machine) before it stops with status 'starved'")
    first_seed: int = Field(0, ge=0, le=2**31 - 2, description="the lowest seed the gate may draw")
    run_seed: Optional[int] = Field(
        None, ge=0, le=2**31 - 1,
        description="draws this run's seeds from [first_seed, 2**31) and varies probe wording; unset: drawn at random and reported",
    )
    workers: int = Field(0, ge=0, le=64, description="sandbox workers the gate spreads its work over (0: one per CPU core, at least 2)")

    @field_validator("*", mode="wrap")
    @classmethod
    def _name_the_range(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        """Out-of-range values are refused with the whole allowed range, not just the bound they crossed."""
        try:
            return handler(value)
        except Exception as exc:
            errors = getattr(exc, "errors", lambda: [])()
            kinds = {e.get("type") for e in errors}
            if info.field_name and kinds & (_BOUND_ERRORS | {"finite_number"}):
                problem = "is not a finite number" if "finite_number" in kinds else "is out of range"
                raise PydanticCustomError(
                    "out_of_range", "{value} {problem} (allowed: {allowed})",
                    {"value": str(value), "problem": problem, "allowed": allowed_range(cls.model_fields[info.field_name])},
                ) from None
            raise


class Counterexample(BaseModel):
    """A replayable failure: a seed and the actions that expose it (shrunk by Hypothesis where it can)."""

    seed: int | None = None
    actions: list[Any] = Field(default_factory=list)
    detail: str = ""
    reward: float | None = Field(None, description="the reward these actions got on this seed")
    transcript: list[dict[str, Any]] | None = Field(None, description="the messages of the episode, where the check shows one")
    reproduced: bool | None = Field(None, description="replayed before it was reported: True when it gave the same reward again")


class CheckResult(BaseModel):
    name: str
    passed: bool
    required: bool = True
    figure: str = Field("", description="what was measured, e.g. '100/100 seeds >= 0.99'")
    message: str = ""
    counterexample: Counterexample | None = None
    seconds: float = 0.0
    skipped: bool = False
    seeds: int = Field(0, description="how many seeds the check used")
    episodes: int = Field(0, description="how many episodes the check ran (its share of shared surveys included)")
    failing_seeds: list[int] = Field(default_factory=list, description="every seed that failed, where the check is per seed")
    data: dict[str, Any] = Field(default_factory=dict, description="the check's figures, machine-readable")
    inconclusive: bool = Field(False, description="not passed, not failed: a figure's confidence interval still straddles its "
                               "threshold after every seed the check may draw (the message names it and the --set that draws more)")
    intervals: dict[str, Any] = Field(default_factory=dict, description="each decided figure: estimate, interval, threshold, "
                                      "side, seeds and outcome (factory.validation.stats)")


class ValidationReport(BaseModel):
    capability: str | None = None
    target: str | None = None
    env_info: dict[str, Any] | None = Field(None, description="what the env declared when loaded in the sandbox: tools, max_steps, ...")
    source_sha256: str
    backend: str = Field(description="the sandbox backend the env actually ran in ('auto' resolved)")
    backend_warning: str | None = None
    passed: bool
    checks: list[CheckResult]
    config: ValidationConfig
    seconds: float
    run_seed: int | None = Field(None, description="the seed the run's seeds were drawn with: --set run_seed=N repeats them")
    off_target: bool = Field(False, description="the env trains on a tool domain of its own, not its target's tools")
    workers: int = Field(1, description="sandbox workers the gate ran on")
    worker_cpu_s: float | None = Field(None, description="CPU seconds the env workers used, all lanes together")
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    status: Literal["passed", "failed", "inconclusive", "starved"] = Field(
        "failed", description="inconclusive: no check failed, some figure straddles its threshold at the cap; starved: the "
        "machine gave the env no CPU for too long, the env was not judged (see starved)")
    starved: str | None = Field(None, description="why the gate stopped without judging the env: the machine, not the env")

    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if c.required and not c.passed and not c.skipped]

    def inconclusive(self) -> list[CheckResult]:
        return [c for c in self.checks if c.required and c.inconclusive]


# --- what the sandbox worker reports (trace_env.gate_probe) ------------------------------------------


class _FromSandbox(BaseModel):
    model_config = ConfigDict(extra="ignore")


class EpisodeSummary(_FromSandbox):
    """One episode played in the worker: its reward as the env computed it (maybe NaN), CPU timings."""

    reward: float
    steps: int = Field(ge=0)
    ended_by: str | None = None
    env_errors: list[dict[str, str]] = Field(default_factory=list)
    reset_ms: float = Field(ge=0)
    step_ms: list[float] = Field(default_factory=list)
    transcript: str
    state_digest: str = ""
    messages_digest: str = ""
    observation_chars: list[int] = Field(default_factory=list)
    actions: list[Any] | None = None
    truth_check: str | None = None

    @field_validator("reward", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan

    @property
    def terminated(self) -> bool:
        return bool(self.ended_by) and (self.ended_by == "user" or self.ended_by.startswith("tool:"))


class SolutionRun(EpisodeSummary):
    turns: list[Any]
    pattern: list[str]
    decision: str = ""


class WorldReport(_FromSandbox):
    """The kit replay of a reference episode, the world's invariants, the truth recomputed at the start."""

    invariants: list[str] = Field(default_factory=list)
    kit: dict[str, Any] = Field(default_factory=dict)
    truth_at_start: str = "undeclared"
    truth_order: str = Field("same", description="'same', or the record generate changed after it last set the truth")
    hidden_threshold: str = Field("undeclared", description="'none', 'undeclared' (no derive_truth), or a numeric "
                                  "boundary of the decision that no number the agent is shown marks")


class SeedSurvey(_FromSandbox):
    """One seed of the gate's survey: the uncached scenario's hashes, first message, and both solutions."""

    seed: int
    error: str | None = None
    generate_ms: float = Field(0.0, ge=0)
    fingerprint: str = ""
    masked_fingerprint: str = ""
    truth_digest: str = ""
    masked_truth_digest: str = ""
    observation_digest: str = ""
    first_message: str = ""
    masked_observation: str = Field("", description="system prompt and first user message, ids and names masked")
    heard: str = Field("", description="every user message and tool result of the reference episode, ids and names masked")
    masked_words: list[str] = Field(default_factory=list, max_length=200,
                                    description="the ids and names masked in the first message and in what the reference heard")
    truth_numbers: list[float] = Field(default_factory=list, max_length=100, description="numbers in the ground truth")
    world: WorldReport | None = None
    reference: SolutionRun | None = None
    skipping: SolutionRun | None = None
    parrot: EpisodeSummary | None = None


class MemoryProbe(_FromSandbox):
    rss_before_mb: float
    rss_after_mb: float
    episodes: int
    growth_bytes_per_episode: float
    transcripts: list[list[str]]


class GenerateTiming(_FromSandbox):
    seed: int
    ms: float = Field(ge=0)
    error: str | None = None


class GenerateFingerprint(_FromSandbox):
    """``generate(seed)``'s scenario as a hash, from one worker (its own hash seed): the determinism sweep."""

    seed: int
    fingerprint: str | None = Field(None, max_length=64)
    error: str | None = Field(None, max_length=200)
