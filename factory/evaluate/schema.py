"""What ``factory eval`` is asked to do and what it reports: pydantic models at the command's boundary.

Arms: ``base`` (adapters disabled), ``adapter:<capability>`` (that adapter alone, on every task) and
``routed`` (the router picks one adapter, or none, per task). The τ² overall pass rate is the paper's:
tasks solved over the union of the evaluated domains' tasks (a task-weighted rate, not the mean of the
domain rates). ToolSandbox (``toolsandbox``, when its package is installed) is reported beside τ², never inside
the τ² overall: ToolSandbox's own mean similarity and number of perfect scenarios, each with a 95% interval.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from schemas.errors import FactoryError
from router.schema import RouterConfig

ARM_BASE = "base"
ARM_ROUTED = "routed"
ADAPTER_PREFIX = "adapter:"
Arms = Literal["base", "adapters", "routed"]
ALL_ARMS: list[Arms] = ["base", "adapters", "routed"]
TAU2_TARGETS = ("tau2-airline", "tau2-retail")
TOOLSANDBOX = "toolsandbox"
EVAL_TARGETS = (*TAU2_TARGETS, TOOLSANDBOX)

TOOLSANDBOX_NOTE = (
    "ToolSandbox was not evaluated: add --target toolsandbox (it needs Apple's ToolSandbox package installed; see "
    "the README) for its mean similarity and perfect count"
)


class EvalError(FactoryError):
    """An evaluation that cannot run as asked; the message says how to fix it."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EvalTarget(_Strict):
    """One target's tasks: all of them, the ids listed, or the first ``limit``."""

    name: str = Field(description="tau2-airline, tau2-retail or toolsandbox")
    task_ids: list[str] | None = Field(default=None, min_length=1)
    limit: int | None = Field(default=None, ge=1, description="the first N tasks (after task_ids, if given)")
    tasks_file: str | None = Field(default=None, description="a τ² tasks.json (default: the tasks the server package bundles)")

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in EVAL_TARGETS:
            raise ValueError(f"target {name!r} cannot be evaluated; choose {', '.join(EVAL_TARGETS)}")
        return name


class EpisodeSettings(_Strict):
    """How each episode runs: the `factory rollout` knobs, shared by the pipeline's rollouts and evaluation."""

    user: str = "scripted"
    judge: str | None = None
    trials: int = Field(default=1, ge=1)
    max_steps: int = Field(default=100, ge=1)
    max_errors: int = Field(default=10, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=0.0, ge=0.0)
    concurrency: int = Field(default=4, ge=1)
    backend: Literal["auto", "mcp", "native"] = "auto"


class EngineSettings(_Strict):
    """What generates the arms' turns: one local transformers model, or an OpenAI-compatible server that
    serves the base model and each adapter under its capability's name (vLLM ``--enable-lora``)."""

    engine: Literal["hf", "server"] = "hf"
    base_url: str | None = Field(default=None, description="engine=server: the server's /v1 URL")
    served_model: str | None = Field(default=None, description="engine=server: the base model's served name (default: model)")
    load_adapters: bool = Field(default=False, description="engine=server: load each adapter into the server first (vLLM's runtime LoRA API)")


class EvalConfig(EpisodeSettings, EngineSettings):
    """Everything one evaluation needs. Relative paths are relative to the working directory."""

    targets: list[EvalTarget] = Field(min_length=1)
    out: Path = Path("eval")
    arms: list[Arms] = Field(default_factory=lambda: list(ALL_ARMS), min_length=1)
    model: str | None = Field(default=None, description="base model folder or hub id (default: the adapters' base)")
    adapters: dict[str, str] = Field(default_factory=dict, description="capability -> PEFT adapter folder")
    menu: str | None = Field(default=None, description="routing menu saved by `factory route --save-menu`")
    capabilities: str | None = Field(default=None, description="capabilities.json (menu descriptions and order)")
    registry: str | None = None
    sandbox: str = "auto"
    router: RouterConfig = Field(default_factory=RouterConfig)
    compact_tools: bool | None = Field(
        default=None, description="tools as signature lines (True) or JSON schemas (False) for every arm; default: "
                                  "each adapter as it was trained (trained_prompt.json), the base model JSON schemas")
    device: str = "cpu"
    dtype: str = "auto"
    seed: int = 0

    @model_validator(mode="after")
    def _coherent(self) -> "EvalConfig":
        names = [t.name for t in self.targets]
        if len(set(names)) != len(names):
            raise ValueError(f"target listed twice: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")
        if len(set(self.arms)) != len(self.arms):
            raise ValueError("an arm is listed twice")
        needs_adapters = [a for a in self.arms if a != "base"]
        if needs_adapters and not self.adapters:
            raise ValueError(f"arm(s) {', '.join(needs_adapters)} need adapters: pass --adapters DIR or --adapter CAPABILITY=PATH")
        if self.engine == "server" and not self.base_url:
            raise ValueError("engine server needs base_url: the OpenAI-compatible server's /v1 address (--base-url)")
        if self.engine == "server" and self.router.soft and "routed" in self.arms:
            raise ValueError("soft routing mixes adapters, but a server applies one LoRA per request; route hard or use engine hf")
        return self

    def arm_ids(self) -> list[str]:
        """The arms in report order: base, each adapter (by name), routed."""
        out: list[str] = []
        for arm in ALL_ARMS:
            if arm not in self.arms:
                continue
            out += [ADAPTER_PREFIX + name for name in sorted(self.adapters)] if arm == "adapters" else [arm]
        return out


def arm_folder(arm: str) -> str:
    return arm.replace(":", "-")


class DomainScore(BaseModel):
    """One arm on one target: counts per episode. Errors (target, user or policy infrastructure failed)
    are not the agent's and stay out of the rate, as in ``factory rollout``."""

    target: str
    tasks: int
    episodes: int
    passed: int
    failed: int
    errors: int
    pass_rate: float | None = Field(description="passed / (episodes - errors)")
    pass_hat_k: dict[str, float] = Field(default_factory=dict)
    not_fully_judged: int = 0
    mean_similarity: float | None = Field(default=None, description="ToolSandbox: mean similarity over scored episodes")
    similarity_ci: list[float] | None = Field(default=None, description="ToolSandbox: 95% bootstrap interval of the mean similarity")
    perfect_ci: list[float] | None = Field(default=None, description="ToolSandbox: 95% Wilson interval of the perfect rate (passed = perfect)")
    skipped: dict[str, int] = Field(default_factory=dict, description="tasks left out because they cannot run here, by reason")


class ArmResult(BaseModel):
    arm: str
    kind: Literal["base", "adapter", "routed"]
    adapter: str | None = None
    policy: str
    folder: str
    domains: list[DomainScore]
    passed: int
    scored: int
    errors: int
    pass_rate: float | None = Field(description="τ² overall: solved over the union of the τ² domains' scored episodes (ToolSandbox apart)")
    routes: dict[str, int] = Field(default_factory=dict, description="routed arm: tasks sent to each option")


class EvalReport(BaseModel):
    out: str
    model: str
    engine: str
    targets: list[str]
    arms: list[ArmResult]
    toolsandbox: dict[str, str | bool] = Field(default_factory=lambda: {"available": False, "note": TOOLSANDBOX_NOTE},
                                               description="whether ToolSandbox was evaluated (its figures are in each arm's domains)")
    notes: list[str] = Field(default_factory=list)
    chart: str | None = None
    seconds: float = 0.0

    def arm(self, name: str) -> ArmResult:
        for result in self.arms:
            if result.arm == name:
                return result
        raise KeyError(name)
