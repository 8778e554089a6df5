"""An env that declares its own reward range (here [-1, 1]) is trained on that range: a success is a share of
the way up it, the warm start keeps the references that reach it, and exported trajectories carry the share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TEST_ENVS
from tests.trainer.conftest import register_env_file
from trainer.endpoint import _record
from trainer.envpool import EnvPool

SIGNED = TEST_ENVS.parent / "gate" / "envs" / "signed_reward.py"


@pytest.fixture(scope="module")
def signed_env(trainer_registry: Path) -> str:
    return register_env_file(trainer_registry, SIGNED)


def test_the_pool_reads_the_declared_range_and_judges_success_on_it(signed_env: str) -> None:
    pool = EnvPool(signed_env)
    try:
        assert pool.reward_range == (0.0, 1.0)  # nothing known before the env has answered
        played = pool.reference_episode(3)
        assert pool.reward_range == (-1.0, 1.0)
        assert pool.success_at(0.99) == pytest.approx(0.98) and pool.success_at(0.5) == pytest.approx(0.0)
        assert played["reward"] >= pool.success_at(0.99)
        [outcome] = pool.reset([0], [5])
        assert outcome.reply is not None and outcome.reply.reward_range == (-1.0, 1.0)
    finally:
        pool.close()


def test_an_exported_trajectory_holds_the_share_of_the_range_and_the_env_figure() -> None:
    episode = {"trial": 0, "seed": 4, "termination": "user", "detail": {}, "messages": [{"role": "user", "content": "hi"}]}
    worst = _record("trace/signed_cancellation-v0", {**episode, "reward": -1.0}, 0.99, (-1.0, 1.0))
    middle = _record("trace/signed_cancellation-v0", {**episode, "reward": 0.0}, 0.99, (-1.0, 1.0))
    best = _record("trace/signed_cancellation-v0", {**episode, "reward": 1.0}, 0.99, (-1.0, 1.0))
    assert (worst.reward, middle.reward, best.reward) == (0.0, 0.5, 1.0)
    assert worst.metadata["env_reward"] == -1.0 and not worst.success and best.success
