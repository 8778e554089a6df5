"""``pipeline.toml`` as pydantic models: one section per stage, every key checked, one line per mistake.

    run_dir = "runs/demo"            # everything the run writes goes here (relative to where you run it)
    model = "tiny"                   # "tiny" (built offline, CPU), a model folder, or a hub id
    [[targets]]
    name = "tau2-airline"
    limit = 3
    [rollouts] ... [analyze] ... [build] ... [train] ... [route] ... [eval] ...

``[train]`` takes the keys of the trainer's ``train.toml`` (``trainer.config.TrainConfig``) except ``model``
and ``output_dir``, which the pipeline sets. ``[build.gate]`` takes the validation gate's thresholds
(``schemas.validation.ValidationConfig``), the same keys as ``factory build --set``.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from schemas.config_file import read_toml
from schemas.errors import InputError, validation_message
from factory.evaluate.schema import ALL_ARMS, Arms, EngineSettings, EpisodeSettings, EvalTarget
from router.schema import RouterConfig
from schemas.names import CAPABILITY_PATTERN
from schemas.validation import ValidationConfig

TINY = "tiny"


class ConfigError(InputError):
    """A pipeline config that cannot be used; the message names the key and the fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RolloutsSection(EpisodeSettings):
    """The agent before training, on the targets: its trajectories are what the analysis reads."""

    policy: str | None = Field(default=None, description="default: the base model itself (hf:MODEL); or an LLM spec such as vllm:Qwen/Qwen3-8B")
    base_url: str | None = Field(default=None, description="OpenAI-compatible server of an LLM policy")


class FallbackCapability(_Strict):
    name: str = Field(pattern=CAPABILITY_PATTERN)
    description: str | None = None
    target: str | None = None


class AnalyzeSection(_Strict):
    """Which capabilities the agent lacks. ``fallback`` is built when the analysis selects none (a tiny
    random model fails in ways no capability explains): the report says so."""

    llm: str | None = Field(default=None, description="labeling LLM; default: the offline rule labeler")
    base_url: str | None = None
    runs: int | None = Field(default=None, ge=1, le=100)
    min_runs: int | None = Field(default=None, ge=1)
    delta: float = Field(default=0.20, ge=0.0, le=1.0)
    coverage: float = Field(default=0.10, ge=0.0, le=1.0)
    bootstrap: int = Field(default=1000, ge=0, le=100_000)
    include_unattributable: bool = False
    concurrency: int = Field(default=8, ge=1)
    max_capabilities: int | None = Field(default=None, ge=1, description="build at most the N with the highest coverage")
    fallback: list[FallbackCapability] = Field(default_factory=list)

    @field_validator("fallback", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        return [{"name": v} if isinstance(v, str) else v for v in value] if isinstance(value, list) else value


class BuildSection(_Strict):
    """One env per capability: the built-in blueprint, or synthesised by ``llm``; the gate decides."""

    llm: str | None = None
    base_url: str | None = None
    max_attempts: int = Field(default=5, ge=1, le=50)
    gate: dict[str, Any] = Field(default_factory=dict, description="validation gate thresholds (factory build --set keys)")

    @field_validator("gate")
    @classmethod
    def _gate(cls, value: dict[str, Any]) -> dict[str, Any]:
        known = list(ValidationConfig.model_fields)
        unknown = [k for k in value if k not in known]
        if unknown:
            close = difflib.get_close_matches(unknown[0], known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(known)})"
            raise ValueError(f"unknown gate key {unknown[0]!r}{hint}")
        ValidationConfig.model_validate(value)
        return value

    def gate_config(self) -> ValidationConfig:
        return ValidationConfig.model_validate(self.gate)


class RouteSection(RouterConfig):
    """The router's knobs (``router.schema.RouterConfig``), plus whether to measure its accuracy against
    the capabilities the analysis found lacking in each failed rollout."""

    model_config = ConfigDict(extra="forbid")
    accuracy: bool = True

    def router_config(self) -> RouterConfig:
        return RouterConfig.model_validate(self.model_dump(exclude={"accuracy"}))


class EvalSection(EpisodeSettings, EngineSettings):
    """The base model, each adapter, and the routed set on the targets (default: the pipeline's targets)."""

    targets: list[EvalTarget] | None = None
    arms: list[Arms] = Field(default_factory=lambda: list(ALL_ARMS), min_length=1)


class PipelineConfig(_Strict):
    run_dir: str = "runs/pipeline"
    model: str = Field(min_length=1, description="'tiny', a model folder, or a hub id")
    device: str = "cpu"
    dtype: str = "auto"
    sandbox: str = "auto"
    registry: str | None = Field(default=None, description="env registry (default: <run_dir>/registry)")
    seed: int = 0
    notes: list[str] = Field(default_factory=list, description="lines added to the report")
    targets: list[EvalTarget] = Field(min_length=1)
    rollouts: RolloutsSection = Field(default_factory=RolloutsSection)
    analyze: AnalyzeSection = Field(default_factory=AnalyzeSection)
    build: BuildSection = Field(default_factory=BuildSection)
    train: dict[str, Any] = Field(default_factory=dict, description="train.toml keys (trainer.config.TrainConfig)")
    route: RouteSection = Field(default_factory=RouteSection)
    eval: EvalSection = Field(default_factory=EvalSection)

    @field_validator("sandbox")
    @classmethod
    def _sandbox(cls, value: str) -> str:
        from sandbox import BACKENDS

        if value != "auto" and value not in BACKENDS:
            raise ValueError(f"{value!r} is not a sandbox backend; choose auto, {', '.join(BACKENDS)}")
        return value

    @field_validator("train")
    @classmethod
    def _train(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in ("model", "output_dir"):
            if key in value:
                raise ValueError(f"{key} is set by the pipeline (model at the top of the file; output under run_dir): remove train.{key}")
        config_type = train_config_type()
        if config_type is not None:  # checked again, strictly, when the train stage starts
            try:
                config_type.model_validate({**value, "model": "m"})
            except ValidationError as exc:
                raise ValueError(explain(exc, "", config_type)) from None
        return value

    @model_validator(mode="after")
    def _coherent(self) -> "PipelineConfig":
        names = [t.name for t in self.targets]
        if len(set(names)) != len(names):
            raise ValueError("a target is listed twice in [[targets]]")
        if self.eval.engine == "server" and not self.eval.base_url:
            raise ValueError("eval.engine = 'server' needs eval.base_url (the OpenAI-compatible server's /v1 address)")
        return self

    @property
    def is_tiny(self) -> bool:
        return self.model == TINY

    def run_path(self) -> Path:
        return Path(self.run_dir).expanduser()

    def registry_path(self) -> Path:
        return Path(self.registry).expanduser() if self.registry else self.run_path() / "registry"

    def eval_targets(self) -> list[EvalTarget]:
        return self.eval.targets or self.targets


def train_config_type() -> type[BaseModel] | None:
    """The trainer's config model, or None where the trainer is not installed (the train stage then says so)."""
    try:
        from trainer.config import TrainConfig
    except ImportError:
        return None
    return TrainConfig


def explain(error: ValidationError, source: str, root: type[BaseModel] | None = None) -> str:
    """Every problem as one line after ``source``: where, what, the input; an unknown key names the key it probably meant."""
    text = validation_message(error, root or PipelineConfig)
    return f"{source}: {text}" if source else text


def parse_config(data: dict[str, Any], source: str = "config") -> PipelineConfig:
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(explain(exc, source)) from None


def load_config(path: Path, run_dir: str | None = None) -> PipelineConfig:
    """Read and check a pipeline TOML file; ``run_dir`` (from ``--run-dir``) replaces the file's."""
    path = Path(path)
    data = read_toml(path, ConfigError)
    if run_dir is not None:
        data["run_dir"] = run_dir
    return parse_config(data, f"--config {path}")
