"""Host side: the policy on seeds it never trained on - the measure a learning claim is judged by.

Held-out seeds (``heldout.first_seed`` on, or with ``variants`` the first of a listed family from there,
``trainer.seeds``; apart from the GRPO and warm-start seeds, the config refuses an overlap) are rolled out with the trainer's own batched engine and token layout, greedily by default, every
``heldout.every`` iterations, before the first and after the last. Each evaluation reports the mean reward
over the episodes with a valid reward, a 95% bootstrap interval over seeds, the success rate and how many
episodes the mean stands on. The global torch RNG is saved and restored around it, so evaluating never
changes the training run's samples (the same seeds give the same training curve with or without it).

:func:`evaluate_adapter` runs the same evaluation for a saved adapter or the bare base model, so a trained
adapter is compared with its base on the very seeds and prompts it was judged by during training.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator

import torch
from pydantic import BaseModel

from trainer.chat import ChatFormat
from trainer.config import HeldoutSettings, RolloutSettings
from trainer.envpool import EnvPool
from trainer.rollout import Rollout, collect_groups
from trainer.seeds import window

EVAL_SEED = 20_240_229
"""Seeds sampling when the evaluation has a temperature; the training RNG is restored afterwards."""


class HeldoutResult(BaseModel):
    """One evaluation: the mean over ``valid`` episodes, its 95% interval (bootstrap over seeds)."""

    mean: float | None = None
    low: float | None = None
    high: float | None = None
    success_rate: float | None = None
    valid: int = 0
    episodes: int = 0
    errors: int = 0
    seconds: float = 0.0
    rewards: dict[int, list[float]] = {}
    generated: dict[int, list[int]] = {}
    """Tokens the policy generated per episode, by seed: two models that score alike still differ here."""
    seeds: list[int] = []
    """The seeds evaluated (with ``variants``, not consecutive)."""
    components: dict[str, float] = {}
    """Mean of each reward component (and gate) over the valid episodes: which part of the task failed."""
    turns: float | None = None
    cut_turns: int = 0
    """Turns cut at ``rollout.max_new_tokens``: a policy whose turns never end scores on the env's floor."""


def heldout_seeds(settings: HeldoutSettings) -> list[int]:
    return [settings.first_seed + j for j in range(settings.seeds)]


def bootstrap_interval(by_seed: list[list[float]], resamples: int = 2000, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap of the mean, resampling seeds (a seed's episodes go together); fixed RNG."""
    import numpy as np

    groups = [g for g in by_seed if g]
    if not groups:
        raise ValueError("no episodes")
    means = np.array([sum(g) / len(g) for g in groups])
    sizes = np.array([len(g) for g in groups], dtype=float)
    picks = np.random.default_rng(0).integers(0, len(groups), size=(resamples, len(groups)))
    stats = (means[picks] * sizes[picks]).sum(axis=1) / sizes[picks].sum(axis=1)
    tail = (1.0 - level) / 2
    return float(np.quantile(stats, tail)), float(np.quantile(stats, 1.0 - tail))


@contextmanager
def _own_rng(seed: int) -> Iterator[None]:
    state = torch.get_rng_state()
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.set_rng_state(state)


def evaluate(
    engine: Any, chat: ChatFormat, pool: EnvPool, settings: HeldoutSettings, rollout: RolloutSettings,
    seeds: list[int] | None = None,
) -> tuple[HeldoutResult, list[Rollout]]:
    """Roll the policy out on the held-out seeds (this rank's share when ``seeds`` is given)."""
    started = time.perf_counter()
    chosen = heldout_seeds(settings) if seeds is None else seeds
    with _own_rng(EVAL_SEED), torch.no_grad():
        rollouts, _ = collect_groups(engine, chat, pool, chosen, settings.samples, rollout, group_offset=0)
    return summarise(rollouts, pool.success_at(rollout.success_reward), time.perf_counter() - started), rollouts


def summarise(rollouts: list[Rollout], success_reward: float, seconds: float = 0.0) -> HeldoutResult:
    """``success_reward`` is a reward on the env's own scale (:meth:`EnvPool.success_at`)."""
    by_seed: dict[int, list[float]] = {}
    generated: dict[int, list[int]] = {}
    valid = [r for r in rollouts if r.trainable]
    for r in valid:
        by_seed.setdefault(r.seed, []).append(r.reward)
        generated.setdefault(r.seed, []).append(r.generated_tokens)
    rewards = [x for group in by_seed.values() for x in group]
    names = sorted({k for r in valid for k in r.reward_components})
    components = {k: round(sum(r.reward_components.get(k, 0.0) for r in valid) / len(valid), 4) for k in names}
    result = HeldoutResult(episodes=len(rollouts), valid=len(rewards), errors=sum(r.termination == "infrastructure_error" for r in rollouts),
                           seconds=round(seconds, 3), rewards=by_seed, generated=generated, components=components,
                           turns=round(sum(r.turns for r in valid) / len(valid), 2) if valid else None,
                           cut_turns=sum(r.cut_turns for r in rollouts))
    if rewards:
        result.mean = sum(rewards) / len(rewards)
        result.low, result.high = bootstrap_interval(list(by_seed.values()))
        result.success_rate = sum(x >= success_reward for x in rewards) / len(rewards)
    return result


def evaluate_adapter(env_id: str, config: Any, adapter_dir: str | None) -> HeldoutResult:
    """The held-out evaluation of ``adapter_dir`` on ``config.model`` (or of the base model alone when None),
    with the training run's renderer, engine, seeds and settings."""
    from trainer.engines import TransformersEngine
    from trainer.model import load_base, run_device

    if config.threads:
        torch.set_num_threads(config.threads)
    base, tokenizer = load_base(config)
    policy = base
    if adapter_dir is not None:
        from peft import PeftModel

        policy = PeftModel.from_pretrained(base, adapter_dir)
    policy.to(run_device())  # the engine puts its inputs where the weights are: on the GPU when the run had one
    policy.eval()
    chat = ChatFormat(tokenizer, config.rollout.compact_tools)
    engine = TransformersEngine(policy, chat, config.heldout.temperature, config.rollout.max_new_tokens)
    with EnvPool(env_id, sandbox=config.sandbox, workers=config.rollout.env_workers, max_steps=config.rollout.max_steps,
                 audit_share=config.audit.share) as pool:
        seeds = window(config, "heldout", config.heldout.seeds, pool)  # the run's own, by variant too
        result, _ = evaluate(engine, chat, pool, config.heldout, config.rollout, seeds)
        pool.audit_check(wait=True)  # the reward audit (env_registry.audit): a score only from rewards a fresh worker reproduces
    result.seeds = seeds
    return result
