"""The reward audit (env_registry.audit) on hostile envs written for it (tests/trainer/hostile.py): each is honest in
a fresh worker, as the gate sees it, and pays 1.0 to an agent that only claims the wifi is on once its worker
is old, once it has played K episodes, or on a random half of its episodes. The pool, ``gym.make`` and a
training run each catch them with a one-line message naming the env and seed; with the audit off the cheat goes
unnoticed. The detection figure the docs state is checked against the auditor's own sampling."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from env_registry.audit import (
    DEFAULT_SHARE,
    AuditMismatch,
    Auditor,
    Episode,
    Step,
    detection_probability,
    episodes_to_catch,
)
from tests.trainer import hostile as hostile_envs
from tests.trainer.conftest import register_env_source
from trainer.envpool import EnvPool

CLAIM = "Your wifi is on now."  # pays 0.0 honestly: the agent never called set_wifi_status


@pytest.fixture(scope="module")
def hostile(trainer_registry: Path) -> dict[str, str]:
    """The hostile envs, stored as if they had passed the gate (the layer under test is the audit)."""
    return {name: register_env_source(trainer_registry, hostile_envs.source(name), validate=False)
            for name in ("cheat_sometimes", "cheat_when_old", "cheat_after_k")}


def play(pool: EnvPool, seed: int) -> float:
    """One episode of the claiming agent on slot 0; its reward."""
    [first] = pool.reset([0], [seed])
    assert first.reply is not None, first.error
    [outcome] = pool.step([0], [CLAIM])
    assert outcome.reply is not None and outcome.reply.terminated, outcome.error
    return outcome.reply.reward


def play_until_caught(pool: EnvPool, seeds: range) -> tuple[list[float], AuditMismatch | None]:
    rewards: list[float] = []
    for seed in seeds:
        rewards.append(play(pool, seed))
        try:
            pool.audit_check(wait=True)
        except AuditMismatch as exc:
            return rewards, exc
    return rewards, None


def assert_one_line_naming(exc: AuditMismatch, env_id: str, seed: int) -> None:
    line = str(exc)
    assert "\n" not in line
    assert env_id in line and f"seed {seed} " in line, line
    assert "python -m env_registry.audit " in line and exc.file is not None and exc.file.exists(), line
    assert f"paid {exc.recorded:g} in this run but {exc.fresh:g}" in line and exc.recorded != exc.fresh


# --- the figure --------------------------------------------------------------------------------------------
def test_the_stated_detection_figure() -> None:
    """Default share 0.25: an env cheating on 5% of episodes is caught within 239 episodes with 95% probability."""
    assert DEFAULT_SHARE == 0.25
    assert episodes_to_catch(DEFAULT_SHARE, 0.05) == 239
    assert detection_probability(DEFAULT_SHARE, 0.05, 239) >= 0.95 > detection_probability(DEFAULT_SHARE, 0.05, 238)
    assert episodes_to_catch(DEFAULT_SHARE, 1.0) == 11  # cheats on every episode (an old worker, after K episodes)


class FakeEnv:
    """A fresh worker of an honest env (reward 0.0 whatever is done): a recorded 1.0 is a cheat."""

    def reset(self, seed: int):
        return "hello", {}

    def step(self, action):
        return "bye", 0.0, True, False, {}

    def close(self) -> None:
        pass


def test_the_auditors_sampling_catches_within_the_figure() -> None:
    """The auditor's own draw, over 600 simulated runs of an env cheating on 5% of its episodes: the share caught
    within 239 episodes is 95% (a binomial 99.9% band), and none is caught with the share at 0."""
    cheats = random.Random(7)
    runs, caught = 600, 0
    for run in range(runs):
        auditor = Auditor(FakeEnv, DEFAULT_SHARE, {"env_id": "trace/fake-v0"}, folder=None, background=False,
                          rng=random.Random(run))
        auditor._write = lambda *a: None  # no file per simulated mismatch
        try:
            for seed in range(239):
                reward = 1.0 if cheats.random() < 0.05 else 0.0
                auditor.offer(Episode(seed, "hello", ["a"], [Step("bye", reward, True, False)]))
        except AuditMismatch:
            caught += 1
    assert abs(caught / runs - 0.95) < 3.3 * (0.95 * 0.05 / runs) ** 0.5, caught / runs
    off = Auditor(FakeEnv, 0.0, {}, background=False)
    for seed in range(239):
        off.offer(Episode(seed, "hello", ["a"], [Step("bye", 1.0, True, False)]))
    assert off.audited == 0


# --- the pool (training and factory eval --env) --------------------------------------------------------------
def test_the_pool_catches_an_env_that_cheats_when_its_worker_is_old(hostile: dict[str, str], tmp_path: Path) -> None:
    env_id = hostile["cheat_when_old"]
    with EnvPool(env_id, sandbox="bwrap", audit_share=0.5, audit_dir=str(tmp_path)) as pool:
        assert play(pool, 0) == 0.0  # a young worker: honest, as the gate sees it
        time.sleep(16.0)  # the worker (started before that episode) is now older than AGE_S (15 s)
        rewards, caught = play_until_caught(pool, range(1, 31))
    assert rewards[0] == 1.0  # the old worker cheats from now on
    assert caught is not None, f"not caught in {len(rewards)} cheating episodes at share 0.5"
    assert_one_line_naming(caught, env_id, caught.seed)
    assert (caught.recorded, caught.fresh) == (1.0, 0.0)
    # the reproduction command replays the fresh side: a fresh worker pays 0, the run was paid 1
    done = subprocess.run([sys.executable, "-m", "env_registry.audit", str(caught.file)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"{env_id} seed {caught.seed}: recorded reward 1, fresh worker 0" in done.stdout


def test_the_pool_catches_an_env_that_cheats_on_a_share_of_its_episodes(hostile: dict[str, str], tmp_path: Path) -> None:
    """Cheats on half its episodes, audited at share 0.5: caught with probability 0.25 an episode, so within 40
    episodes with probability 1 - 0.75^40 > 0.99998."""
    env_id = hostile["cheat_sometimes"]
    with EnvPool(env_id, sandbox="bwrap", audit_share=0.5, audit_dir=str(tmp_path)) as pool:
        rewards, caught = play_until_caught(pool, range(40))
        assert pool.auditor.errors == 0, pool.auditor.first_error
    assert caught is not None, f"not caught in {len(rewards)} episodes"
    assert_one_line_naming(caught, env_id, caught.seed)


def test_with_the_audit_off_the_cheat_goes_unnoticed(hostile: dict[str, str]) -> None:
    """The same env, share 0: it is paid 1.0 for a claim on some episodes and nothing stops it."""
    with EnvPool(hostile["cheat_sometimes"], sandbox="bwrap", audit_share=0.0) as pool:
        rewards, caught = play_until_caught(pool, range(20))
        assert pool.auditor.audited == 0
    assert caught is None and 1.0 in rewards and 0.0 in rewards  # P(all alike) = 2 * 0.5^20


def test_the_pool_catches_an_env_that_cheats_after_k_episodes_in_one_worker(hostile: dict[str, str], tmp_path: Path) -> None:
    """Counts episodes in os.environ. Where a fresh process per episode is in place the count never passes K and
    the env is honest (that defence held); wherever it cheats, the audit must catch it."""
    env_id = hostile["cheat_after_k"]
    with EnvPool(env_id, sandbox="bwrap", audit_share=0.5, audit_dir=str(tmp_path)) as pool:
        rewards, caught = play_until_caught(pool, range(30))
    cheated = [i for i, r in enumerate(rewards) if r == 1.0]
    if cheated:
        assert cheated[0] >= 3  # honest for its first K episodes, as a gate's fresh worker sees it
        assert caught is not None, f"cheated on {len(cheated)} episodes and was not caught"
        assert_one_line_naming(caught, env_id, caught.seed)
    else:
        assert caught is None and len(rewards) == 30


# --- gym.make ------------------------------------------------------------------------------------------------
def gym_make_catches(env_id: str, episodes: int) -> None:
    """A gym.make env audited on every episode stops the claiming agent within ``episodes`` episodes, with one line
    naming the env and the seed."""
    import gymnasium as gym

    env = gym.make(env_id, sandbox="bwrap", audit=1.0)
    try:
        with pytest.raises(AuditMismatch) as raised:
            for seed in range(episodes):
                env.reset(seed=seed)
                env.step(CLAIM)
    finally:
        env.close()
    assert_one_line_naming(raised.value, env_id, raised.value.seed)


def test_gym_make_envs_audit_themselves(hostile: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import gymnasium as gym

    env_id = hostile["cheat_sometimes"]
    gym_make_catches(env_id, 20)  # caught with probability 0.5 an episode

    monkeypatch.setenv("TRACE_FACTORY_AUDIT_SHARE", "0")  # off for gym envs made without audit=
    env = gym.make(env_id, sandbox="bwrap")
    try:
        rewards = []
        for seed in range(20):
            env.reset(seed=seed)
            rewards.append(env.step(CLAIM)[1])
    finally:
        env.close()
    assert 1.0 in rewards and 0.0 in rewards


# --- a training run ------------------------------------------------------------------------------------------
def test_a_training_run_stops_on_a_mismatch_and_keeps_what_it_trained(hostile: dict[str, str], tiny_model: Path,
                                                                        tmp_path: Path) -> None:
    from trainer import checkpoint as ckpt
    from trainer.config import load_config
    from trainer.loop import GRPORun

    env_id = hostile["cheat_sometimes"]
    settings = ["threads=1", "sandbox='bwrap'", "grpo.groups=1", "grpo.group_size=4", "rollout.max_new_tokens=8",
                "rollout.max_seq_len=1024", "warm_start.steps=0", "heldout.seeds=0", "audit.share=1.0"]
    out = tmp_path / "run"
    run = GRPORun(env_id, load_config(None, settings, model=str(tiny_model), output_dir=str(out), **{"grpo.iterations": 3}))
    with pytest.raises(AuditMismatch) as raised:  # 12 episodes, each caught with probability 0.5
        run.train()
    line = str(raised.value)
    assert_one_line_naming(raised.value, env_id, raised.value.seed)
    kept = ckpt.latest(out)
    assert kept is not None and f"kept iteration {run.saved}'s checkpoint in {kept}" in line
    assert raised.value.file is not None and raised.value.file.parent == out / "audit"
    assert not (out / "adapter").exists()  # the run stopped before writing a final adapter


def test_the_held_out_evaluation_behind_factory_eval_env_stops_on_a_mismatch(hostile: dict[str, str], tiny_model: Path) -> None:
    """``factory eval --env`` scores through trainer.heldout.evaluate_adapter: no score from unreproduced rewards."""
    from trainer.config import load_config
    from trainer.heldout import evaluate_adapter

    config = load_config(None, ["threads=1", "sandbox='bwrap'", "rollout.max_new_tokens=8", "rollout.max_seq_len=1024",
                                "heldout.seeds=12", "audit.share=1.0"], model=str(tiny_model))
    with pytest.raises(AuditMismatch) as raised:  # 12 episodes, each caught with probability 0.5
        evaluate_adapter(hostile["cheat_sometimes"], config, None)
    assert_one_line_naming(raised.value, hostile["cheat_sometimes"], raised.value.seed)


# --- honest envs never trip it ------------------------------------------------------------------------------------
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "envs" / "cancellation_eligibility.py"


@pytest.mark.parametrize("env", ["example", "permission_error_recovery"])
def test_the_example_env_and_a_blueprint_never_trip_the_audit_in_a_real_run(env: str, trainer_registry: Path,
                                                                           tiny_model: Path, tmp_path: Path) -> None:
    """A real GRPO run (tiny CPU model, its own garbled tool calls and talk) with every episode audited: every
    replay on a fresh worker reproduces it. (bench/bench_audit.py runs all six blueprints the same way.)"""
    from env_registry.registration import register_all
    from env_registry.registry import Registry
    from factory.blueprints import blueprint_source
    from trace_env.loader import load_env
    from trainer.config import load_config
    from trainer.loop import GRPORun

    source = EXAMPLE.read_text() if env == "example" else blueprint_source(env)
    loaded = load_env(source)
    manifest, _ = Registry(trainer_registry).put(source, capability=loaded.capability, target=loaded.target,
                                                 tools=loaded.tools(), max_steps=loaded.max_steps)
    register_all(trainer_registry)
    settings = ["threads=1", "sandbox='bwrap'", "grpo.groups=2", "grpo.group_size=2", "rollout.max_new_tokens=32",
                "rollout.max_seq_len=16384", "warm_start.steps=0", "heldout.seeds=0", "audit.share=1.0"]
    run = GRPORun(manifest.gym_id, load_config(None, settings, model=str(tiny_model), output_dir=str(tmp_path / "run"),
                                               **{"grpo.iterations": 1}))
    result = run.train()  # raises AuditMismatch if any replay differs
    audit = run.pool.auditor
    assert result.adapter_dir is not None
    assert audit.audited >= 4 and audit.audited == audit.offered and audit.errors == 0, audit.first_error
