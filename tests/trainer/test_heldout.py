"""Held-out seeds: kept apart from every seed the run trains on, and reported with how many episodes and
how sure (the run itself is exercised in test_train_cli and test_learning)."""

from __future__ import annotations

import pytest

from trainer.config import load_config
from trainer.errors import TrainError
from trainer.heldout import bootstrap_interval, heldout_seeds, summarise
from trainer.rollout import Rollout


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["heldout.first_seed=100", "grpo.groups=4", "grpo.iterations=40"], "GRPO (first_env_seed) seeds [0, 160) overlap heldout seeds [100, 116)"),
        (["heldout.first_seed=1000010", "warm_start.steps=5"], "warm_start seeds [1000000, 1000032) overlap heldout seeds"),
        (["first_env_seed=999990", "warm_start.steps=5"], "overlap warm_start seeds"),
    ],
)
def test_overlapping_seed_ranges_are_refused_with_one_line(overrides: list[str], message: str) -> None:
    with pytest.raises(TrainError, match="overlap") as caught:
        load_config(None, overrides)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_default_seed_ranges_are_apart_and_zero_seeds_turns_evaluation_off() -> None:
    config = load_config(None, [])
    training = set(range(config.first_env_seed, config.first_env_seed + config.grpo.iterations * config.grpo.groups))
    assert not training & set(heldout_seeds(config.heldout)) and len(heldout_seeds(config.heldout)) == 16
    assert heldout_seeds(load_config(None, ["heldout.seeds=0"]).heldout) == []
    load_config(None, ["heldout.seeds=0", "heldout.first_seed=0"])  # nothing held out: nothing to overlap


def test_the_mean_stands_on_the_valid_episodes_and_the_interval_is_over_seeds() -> None:
    rollouts = [Rollout(group=i, member=0, seed=10 + i, reward=r) for i, r in enumerate([1.0, 0.0, 1.0, 0.5])]
    rollouts.append(Rollout(group=4, member=0, seed=14, reward=0.0, termination="infrastructure_error", error="WorkerCrashed"))
    result = summarise(rollouts, success_reward=0.99)
    assert (result.valid, result.episodes, result.errors) == (4, 5, 1)
    assert result.mean == pytest.approx(0.625) and result.success_rate == pytest.approx(0.5)
    assert result.low is not None and result.high is not None and 0.0 <= result.low <= result.mean <= result.high <= 1.0
    assert bootstrap_interval([[1.0], [0.0], [1.0], [0.5]]) == (result.low, result.high)  # fixed resampling: reproducible
    many = bootstrap_interval([[1.0], [0.0], [1.0], [0.5]] * 16)
    assert many[1] - many[0] < result.high - result.low  # more seeds, a narrower interval
    assert bootstrap_interval([[0.7, 0.7]] * 3) == pytest.approx((0.7, 0.7))
