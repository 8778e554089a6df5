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


class AuditSettings(_Section):
    """The reward audit (``env_registry.audit``): a share of the episodes is replayed on a fresh worker, and one
    that pays otherwise stops the run, keeping what was trained. Share 0.25: an env that cheats on 5% of its
    episodes is caught within 239 episodes with 95% probability (1 - (1 - share * 0.05)^n)."""

    share: float = Field(0.25, ge=0, le=1, description="share of episodes replayed on a fresh sandbox worker (0 = no audit)")


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
    audit: AuditSettings = Field(default_factory=AuditSettings)
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


# --- defaults by model size (``factory train`` without --set for these keys) -----------------------------------
#: Settings that worked, by the base model's parameter count: (upper bound, dotted key -> value). Below 50M (the
#: 256-dim tiny Qwen3) the tiny preset of ``bench/bench_learning.py``; below 1B (SmolLM2-135M-Instruct) its SmolLM2
#: preset (at GRPO lr 2e-4 or more one or two updates collapsed SmolLM2; at a reference share of 0.3 its samples
#: never solved a seed). From 1B up the paper's recipe, the fields' own defaults. A key the user set (TOML,
#: --set or a flag) is never replaced, and a warm start the user configured (any ``warm_start`` key) is taken
#: whole: none of its keys is then chosen by size.
SIZE_DEFAULTS: tuple[tuple[float, str, dict[str, Any]], ...] = (
    (50e6, "tiny", {
        "grpo.lr": 3e-4, "grpo.groups": 4, "grpo.group_size": 8, "rollout.temperature": 0.7, "warm_start.steps": 400, "warm_start.lr": 3e-3, "warm_start.batch_size": 8,
        "warm_start.seeds": 256, "warm_start.reference_share": 0.3}),
    (1e9, "small", {
        "grpo.lr": 3e-5, "grpo.groups": 2, "grpo.group_size": 6, "rollout.temperature": 1.0, "warm_start.steps": 40,
        "warm_start.lr": 4e-4, "warm_start.batch_size": 4, "warm_start.seeds": 160, "warm_start.reference_share": 0.5}),
)


def size_class(parameters: int | None) -> tuple[str, dict[str, Any]]:
    """("tiny" | "small" | "large", the defaults of that size); an unknown size is "large" (the fields' own)."""
    if parameters is not None:
        for bound, name, values in SIZE_DEFAULTS:
            if parameters < bound:
                return name, values
    return "large", {}


def user_set(config: TrainConfig, key: str) -> bool:
    """Whether the dotted ``key`` was given (TOML, --set, a flag), not left at its default."""
    section, _, field = key.rpartition(".")
    owner: BaseModel = config
    for part in filter(None, section.split(".")):
        if part not in owner.model_fields_set:
            return False
        owner = getattr(owner, part)
    return field in owner.model_fields_set


def with_size_defaults(config: TrainConfig, parameters: int | None) -> tuple[TrainConfig, dict[str, Any]]:
    """``config`` with the defaults of its model's size (:data:`SIZE_DEFAULTS`) for every key the user did not set,
    and the keys so chosen (empty: nothing changed)."""
    _, values = size_class(parameters)
    own_warm_start = bool(config.warm_start.model_fields_set) and "warm_start" in config.model_fields_set
    chosen = {key: value for key, value in values.items()
              if not user_set(config, key) and not (own_warm_start and key.startswith("warm_start."))}
    if not chosen:
        return config, {}
    data = config.model_dump()
    for key, value in chosen.items():
        section, _, field = key.rpartition(".")
        data[section][field] = value
    resolved = TrainConfig.model_validate(data)
    for name in config.model_fields_set:  # what the user set stays marked as set
        resolved.model_fields_set.add(name)
    return resolved, chosen


def model_parameters(model: str | None, gguf_file: str | None = None) -> int | None:
    """The base model's parameter count without loading its weights (None: not a local model this can read). A local
    folder's ``config.json`` is built on the meta device; a GGUF file's tensors are counted from its header."""
    if not model or not Path(model).is_dir():
        return None
    folder = Path(model)
    try:
        if gguf_file:
            from gguf import GGUFReader

            return int(sum(int(t.n_elements) for t in GGUFReader(str(folder / gguf_file)).tensors))
        if not (folder / "config.json").is_file():
            return None
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM

        with torch.device("meta"):
            built = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(folder)))
        return int(sum(p.numel() for p in built.parameters()))
    except Exception:  # noqa: BLE001 - an unreadable model keeps the fields' own defaults; loading it says what is wrong
        return None
