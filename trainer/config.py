"""Everything a training run is configured by, as one pydantic model: a TOML file plus ``--set`` overrides.

Defaults follow the paper's recipe (GRPO, G groups x K rollouts from one seed each, AdamW at 1e-5,
temperature 1.0, up to 40 iterations, no KL term); every field can be set in ``train.toml``::

    model = "Qwen/Qwen3-8B"
    [lora]
    rank = 16
    [grpo]
    groups = 8
    group_size = 8
    [rollout]
    max_new_tokens = 512

and overridden on the command line with dotted keys: ``--set grpo.lr=2e-5 --set lora.rank=32``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.config_file import load_settings, read_toml
from trainer.errors import TrainError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoraSettings(_Section):
    """The adapter PEFT trains; the base model stays frozen."""

    rank: int = Field(16, ge=1, description="LoRA rank r (recorded in adapter_config.json)")
    alpha: float = Field(16.0, gt=0, description="LoRA alpha; the update is scaled by alpha / rank")
    dropout: float = Field(0.0, ge=0, lt=1, description="dropout on the LoRA path (0 keeps on-policy ratios exactly 1)")
    target_modules: list[str] | str = Field("all-linear", description="module names, or 'all-linear'")


class GRPOSettings(_Section):
    """The update: group-relative advantages and the per-token clipped ratio objective."""

    iterations: int = Field(40, ge=1)
    groups: int = Field(4, ge=1, description="G: distinct seeds per iteration")
    group_size: int = Field(8, ge=2, description="K: rollouts per seed, all from the same initial state")
    lr: float = Field(1e-5, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    epsilon: float = Field(0.2, gt=0, description="lower clip: ratio >= 1 - epsilon")
    epsilon_high: float | None = Field(None, gt=0, description="upper clip: ratio <= 1 + epsilon_high (default: epsilon)")
    advantage_eps: float = Field(1e-4, gt=0, description="epsilon in (r - mean) / (std + epsilon)")
    zero_variance_tol: float = Field(1e-6, ge=0, description="a group whose reward std is at most this is dropped")
    kl_coef: float = Field(0.0, ge=0, description="beta of a KL penalty to the frozen base (adapter disabled); 0 = off")
    loss_type: Literal["grpo", "dapo"] = Field(
        "grpo", description="how token losses add up, as TRL's loss_type: 'grpo' averages each trajectory's tokens, then "
                            "trajectories (a short episode's tokens weigh more); 'dapo' averages over every trained token "
                            "of the step, so tokens that success and failure share cancel whatever the episodes' lengths")
    max_grad_norm: float | None = Field(1.0, gt=0)
    steps_per_iteration: int = Field(1, ge=1, description="optimizer steps per batch of rollouts (mini-batches)")
    epochs: int = Field(1, ge=1, description="passes over each batch of rollouts")
    micro_batch_size: int = Field(4, ge=1, description="trajectories per forward pass (gradient accumulation)")
    logprob_chunk: int = Field(1024, ge=1, description="token positions per chunk of the output layer")
    gradient_checkpointing: bool = False

    @property
    def clip_high(self) -> float:
        return self.epsilon if self.epsilon_high is None else self.epsilon_high


class HintSettings(_Section):
    """Expert hints in a share of each group's prompts, stripped before the update (as in the paper's code)."""

    share: float = Field(0.0, ge=0, le=1, description="share of each group whose prompt carries the hint")
    source: Literal["reference", "text"] = "reference"
    text: str = Field("", description="the hint when source = 'text'")


class RolloutSettings(_Section):
    engine: Literal["transformers", "vllm"] = "transformers"
    compact_tools: bool = Field(
        False, description="tools as one signature line each in the system text instead of JSON schemas (small models); "
                           "recorded in the adapter folder (trained_prompt.json), so rollout and evaluation show the adapter the same")
    min_valid_share: float = Field(
        0.5, ge=0, le=1, description="an iteration whose share of rollouts with a valid reward is below this is rolled out again")
    retries: int = Field(1, ge=0, description="roll-outs again of an iteration with too few valid rollouts; then it is marked and not trained on")
    temperature: float = Field(1.0, gt=0)
    max_new_tokens: int = Field(512, ge=1, description="per assistant turn; a turn cut here is counted")
    max_seq_len: int = Field(8192, ge=16, description="whole episode (prompt + turns); longer episodes are cut and dropped")
    max_steps: int | None = Field(None, ge=1, le=1000, description="turns per episode before the env truncates and grades it "
                                                                "(gym.make(id, max_steps=N)); default: the env's own limit")
    success_reward: float = Field(0.99, description="a rollout at or above this reward counts as a success")
    env_workers: int | None = Field(None, ge=1, description="threads stepping the sandboxed envs (default: one per episode)")
    merge_adapter: bool = Field(
        False, description="transformers engine: generate with the LoRA update folded into the base weights, restored exactly "
                           "after (trainer.engines.merged_adapter; one matmul per layer per token instead of three); the "
                           "samples then differ from the side path's by float rounding, so it is off unless asked (bench_learning "
                           "turns it on); in bf16 the folded sum rounds to bf16")
    vllm_gpu_memory_utilization: float = Field(0.4, gt=0, le=1)
    hint: HintSettings = Field(default_factory=HintSettings)


class WarmStartSettings(_Section):
    """Supervised steps on the env's reference solutions before GRPO (0 = none). On by default: without it an
    untrained policy scores ~0 on a real blueprint and most iterations train nothing (issue 21's note)."""

    steps: int = Field(16, ge=0)
    seeds: int = Field(32, ge=1, description="distinct reference episodes to learn from")
    first_seed: int = Field(1_000_000, ge=0, description="kept apart from the GRPO seeds")
    lr: float = Field(1e-3, gt=0)
    batch_size: int = Field(8, ge=1)
    source: Literal["reference", "skipping", "other"] = Field(
        "reference", description="what the warm start plays (trainer.warmstart): 'reference' the env's reference solution "
                                 "(it demonstrates the capability) mixed with its capability-skipping one by reference_share; "
                                 "'skipping' only the capability-skipping one (tools and format, never the capability); 'other' "
                                 "the reference solutions of the OTHER registered capabilities on the same target (domain and "
                                 "format, not this capability) for reference_share of the episodes, the rest this env's skipping ones")
    reference_share: float = Field(
        1.0, ge=0, le=1, description="share of the episodes played by the reference solution; the rest are the env's "
                                     "capability-skipping solution, so the warm start makes a base that uses the tools but "
                                     "mostly lacks the capability, as TRACE's base agent does, and GRPO must teach it")


class ValidationSettings(_Section):
    """Seeds apart from training, warm start and held-out ones, evaluated during training in place of the held-out
    ones when ``seeds`` > 0: every choice (learning rate, warm start, group size) is made on them, and the held-out
    seeds are scored once, at the end (bench/bench_learning.py's protocol)."""

    seeds: int = Field(0, ge=0, description="validation seeds (0 = none: the held-out seeds are evaluated during training, as before)")
    first_seed: int = Field(3_000_000, ge=0, description="validation seeds are first_seed, first_seed + 1, ...")


class HeldoutSettings(_Section):
    """Seeds the run never trains on, rolled out with the current adapter every few iterations and at the end."""

    seeds: int = Field(16, ge=0, description="held-out seeds (0 = no held-out evaluation)")
    first_seed: int = Field(2_000_000, ge=0, description="held-out seeds are first_seed, first_seed + 1, ...")
    every: int = Field(5, ge=1, description="evaluate after every N GRPO iterations (also before the first and after the last)")
    temperature: float = Field(0.0, ge=0, description="sampling temperature of the evaluation (0 = greedy)")
    samples: int = Field(1, ge=1, description="episodes per held-out seed")


class TrainConfig(_Section):
    """One training run: which model, which adapter, how to roll out, how to update, where to write."""

    model: str | None = Field(None, description="local path or hub id of the base model")
    gguf_file: str | None = Field(None, description="GGUF file inside `model` (transformers loads it with gguf_file=)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    seed: int = 0
    threads: int | None = Field(None, ge=1, description="torch CPU threads (default: torch's choice)")
    first_env_seed: int = Field(0, ge=0, description="GRPO scenario seeds are drawn from this base")
    variants: list[str] = Field(
        default_factory=list, description="a curriculum on one family of the env's scenarios: warm up, train and hold out only "
                                          "seeds whose scenario's meta['variant'] is one of these (trainer.seeds); empty: all")
    lora: LoraSettings = Field(default_factory=LoraSettings)
    grpo: GRPOSettings = Field(default_factory=GRPOSettings)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    warm_start: WarmStartSettings = Field(default_factory=WarmStartSettings)
    heldout: HeldoutSettings = Field(default_factory=HeldoutSettings)
    validation: ValidationSettings = Field(default_factory=ValidationSettings)
    sandbox: str | None = Field(None, description="sandbox backend for env code (default: $TRACE_FACTORY_SANDBOX or auto)")
    output_dir: str | None = Field(None, description="run folder (default: runs/<capability>)")
    save_every: int | None = Field(None, ge=1, description="checkpoint every N iterations (and at the end); default: by cost, every iteration on small runs (trainer.stop)")
    keep_checkpoints: int = Field(2, ge=1)
    trackers: list[Literal["tensorboard", "wandb"]] = Field(default_factory=list)
    project: str = Field("trace-factory", description="tracker project name")

    @model_validator(mode="after")
    def _groups_fill_batches(self) -> "TrainConfig":
        if self.rollout.max_new_tokens >= self.rollout.max_seq_len:
            raise ValueError("rollout.max_new_tokens must be smaller than rollout.max_seq_len")
        return self

    @model_validator(mode="after")
    def _seeds_apart(self) -> "TrainConfig":
        """Training, warm-start, validation and held-out seeds never meet: a held-out gain is on scenarios never trained on."""
        spans = {
            "GRPO (first_env_seed)": (self.first_env_seed, self.first_env_seed + self.grpo.iterations * self.grpo.groups),
            "warm_start": (self.warm_start.first_seed, self.warm_start.first_seed + (self.warm_start.seeds if self.warm_start.steps else 0)),
            "heldout": (self.heldout.first_seed, self.heldout.first_seed + self.heldout.seeds),
            "validation": (self.validation.first_seed, self.validation.first_seed + self.validation.seeds),
        }
        names = list(spans)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                (a0, a1), (b0, b1) = spans[a], spans[b]
                if a0 < a1 and b0 < b1 and a0 < b1 and b0 < a1:
                    raise ValueError(f"{a} seeds [{a0}, {a1}) overlap {b} seeds [{b0}, {b1}); move one of them apart")
        return self


def load_config(path: str | Path | None = None, overrides: list[str] | None = None, **values: Any) -> TrainConfig:
    """The run's config: TOML file, then ``KEY=VALUE`` overrides (dotted keys), then keyword values.

    Every problem becomes one :class:`TrainError` line naming the key and what is wrong.
    """
    data: dict[str, Any] = {}
    if path is not None:
        data = read_toml(path, TrainError)
    source = f"--config {path}" if path is not None else "config"
    return load_settings(TrainConfig, data, overrides or [], values=values, source=source, error=TrainError)
