"""Validation configuration and reports: what the gate checked, the figure it measured, and why it failed."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, Field


class ValidationConfig(BaseModel):
    """Thresholds of the validation gate (defaults from ARCHITECTURE.md); every one can be overridden."""

    solvability_seeds: int = Field(100, ge=1)
    solvability_min_reward: float = 0.99
    solvability_min_share: float = 0.98
    necessity_seeds: int = Field(100, ge=1)
    necessity_max_reward: float = 0.5
    necessity_min_share: float = 0.90
    diversity_seeds: int = Field(200, ge=2)
    diversity_min_share: float = 0.95
    grpo_seeds: int = Field(16, ge=1)
    grpo_group_size: int = Field(8, ge=2)
    grpo_min_informative_share: float = 0.5
    fuzz_examples: int = Field(60, ge=1, description="Hypothesis examples per fuzzing check")
    load_timeout_s: float = 5.0
    reset_budget_ms: float = 200.0
    step_budget_ms: float = 100.0
    max_steps_limit: int = Field(100, ge=1, description="longest episode an env may declare")
    memory_budget_mb: int = 512
    rpc_timeout_s: float = 20.0
    first_seed: int = 0


class Counterexample(BaseModel):
    """A replayable failure: a seed and the actions that expose it (shrunk by Hypothesis where it can)."""

    seed: int | None = None
    actions: list[Any] = Field(default_factory=list)
    detail: str = ""


class CheckResult(BaseModel):
    name: str
    passed: bool
    required: bool = True
    figure: str = Field("", description="what was measured, e.g. '100/100 seeds >= 0.99'")
    message: str = ""
    counterexample: Counterexample | None = None
    seconds: float = 0.0
    skipped: bool = False


class ValidationReport(BaseModel):
    capability: str | None = None
    target: str | None = None
    env_info: dict[str, Any] | None = Field(None, description="what the env declared when loaded in the sandbox: tools, max_steps, ...")
    source_sha256: str
    backend: str
    backend_warning: str | None = None
    passed: bool
    checks: list[CheckResult]
    config: ValidationConfig
    seconds: float
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    status: Literal["passed", "failed"] = "failed"

    def failures(self) -> list[CheckResult]:
        return [c for c in self.checks if c.required and not c.passed]
