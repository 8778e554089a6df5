"""The reward audit against code execution inside the env's process (issue 32): takeover_sometimes
(tests/trainer/hostile.py) runs code of its own through ``dataclasses`` and rewrites what its process's grading engine returns on a random
half of its episodes (an agent that only claims the wifi is on is paid 1.0). Its own code is honest and lint-clean,
and it restores the engine's code before the worker's integrity check looks, so nothing in its process tells it
apart; a replay on a fresh worker pays otherwise, and the pool and ``gym.make`` stop with one line naming the env
and the seed. With the audit off (share 0) the cheat goes unnoticed: the control that the audit is what catches it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from factory.validation.static import check_source
from tests.trainer import hostile
from tests.trainer.conftest import register_env_source
from tests.trainer.test_audit import assert_one_line_naming, gym_make_catches, play_until_caught
from trainer.envpool import EnvPool


@pytest.fixture(scope="module")
def takeover(trainer_registry: Path) -> str:
    """Stored as if it had passed the gate (the layer under test is the audit)."""
    source = hostile.source("takeover_sometimes")
    assert check_source(source) == []  # the lint is a quality filter: it sees no code in a field's name
    return register_env_source(trainer_registry, source, validate=False)


@pytest.mark.parametrize("share", [0.5, 0.0])
def test_the_pool_audit_catches_a_takeover_of_the_grading_and_nothing_does_without_it(takeover: str, share: float,
                                                                                      tmp_path: Path) -> None:
    """Share 0.5: caught with probability 0.25 an episode, within 40 with probability 1 - 0.75^40 > 0.99998.
    Share 0: paid 1.0 for the claim on some episodes and 0.0 on others (P(all alike) = 2 * 0.5^40), never stopped."""
    with EnvPool(takeover, sandbox="bwrap", audit_share=share, audit_dir=str(tmp_path)) as pool:
        rewards, caught = play_until_caught(pool, range(40))
        assert pool.auditor.errors == 0, pool.auditor.first_error
        audited = pool.auditor.audited
    if share:
        assert caught is not None, f"not caught in {len(rewards)} episodes"
        assert_one_line_naming(caught, takeover, caught.seed)
        assert (caught.recorded, caught.fresh) in ((1.0, 0.0), (0.0, 1.0))
    else:
        assert caught is None and audited == 0 and len(rewards) == 40
        assert 1.0 in rewards and 0.0 in rewards  # the takeover paid the claim, and nothing noticed


def test_gym_make_envs_audit_a_takeover(takeover: str) -> None:
    gym_make_catches(takeover, 24)  # caught with probability 0.5 an episode
