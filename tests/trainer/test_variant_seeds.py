"""A curriculum on one family of an env's scenarios (``variants``): every seed window keeps only seeds whose
scenario is of a listed variant, read from the env in its sandbox; and ``rollout.max_steps`` caps episodes."""

from __future__ import annotations

import pytest

from tests.conftest import TEST_ENVS


@pytest.fixture(scope="module")
def parity_env(tmp_path_factory, trainer_registry) -> str:
    """wifi_on whose scenarios name a variant by seed: 'odd', 'even', and 'rare' on multiples of 7."""
    from tests.trainer.conftest import register_env_file

    source = (TEST_ENVS / "wifi_on.py").read_text()
    marked = source.replace(
        '            truth={"wifi": True, "phone": phone},\n        )',
        '            truth={"wifi": True, "phone": phone},\n'
        '            meta={"variant": "rare" if seed % 7 == 0 else ("odd" if seed % 2 else "even")},\n        )',
    ).replace('capability = "wifi_on"', 'capability = "wifi_parity"')
    assert marked.count("variant") == 1 and "wifi_parity" in marked
    path = tmp_path_factory.mktemp("parity") / "wifi_parity.py"
    path.write_text(marked)
    return register_env_file(trainer_registry, path, validate=False)


def expected(base: int, count: int, keep) -> list[int]:  # noqa: ANN001
    return [s for s in range(base, base + 50 * count) if keep(s)][:count]


def test_each_window_keeps_only_seeds_of_the_listed_variants(parity_env) -> None:
    from trainer.config import load_config
    from trainer.envpool import EnvPool
    from trainer.seeds import window

    config = load_config(None, ['variants=["odd", "rare"]', "first_env_seed=100", "heldout.first_seed=5000",
                                "warm_start.first_seed=9000", "heldout.seeds=5", "warm_start.seeds=4"])
    keep = lambda s: s % 7 == 0 or s % 2 == 1  # noqa: E731
    with EnvPool(parity_env, sandbox="bwrap") as pool:
        assert window(config, "grpo", 6, pool) == expected(100, 6, keep)
        assert window(config, "heldout", 5, pool) == expected(5000, 5, keep)
        assert window(config, "warm_start", 4, pool) == expected(9000, 4, keep)
        assert pool.scenario_variant(14) == "rare" and pool.scenario_variant(3) == "odd"
    plain = load_config(None, ["first_env_seed=100"])
    assert window(plain, "grpo", 3) == [100, 101, 102]  # no variants: consecutive, and the env is not asked


def test_a_variant_the_env_never_generates_is_refused_in_one_line_naming_what_it_saw(parity_env) -> None:
    from trainer.config import load_config
    from trainer.envpool import EnvPool
    from trainer.errors import TrainError
    from trainer.seeds import window

    # the scan stops at the next window's base (heldout 2,000,000 is far; here warm_start sits 40 seeds above)
    config = load_config(None, ['variants=["wifi_off"]', "first_env_seed=0", "warm_start.first_seed=40", "grpo.iterations=1"])
    with EnvPool(parity_env, sandbox="bwrap") as pool, pytest.raises(TrainError) as caught:
        window(config, "grpo", 2, pool)
    message = str(caught.value)
    assert "\n" not in message and "wifi_off" in message and "0..39" in message
    assert "odd (" in message and "even (" in message and "rare (" in message


def test_a_run_trains_and_holds_out_on_the_variant_and_factory_eval_reuses_its_seeds(tmp_path, parity_env, tiny_model) -> None:
    from trainer.config import load_config
    from trainer.heldout import evaluate_adapter
    from trainer.loop import GRPORun

    settings = ["threads=1", "sandbox='bwrap'", "rollout.max_seq_len=1024", "rollout.max_new_tokens=24",
                "warm_start.steps=0", "grpo.groups=2", "grpo.group_size=2", "heldout.seeds=3", 'variants=["rare"]']
    config = load_config(None, settings, model=str(tiny_model), output_dir=str(tmp_path / "run"), **{"grpo.iterations": 2})
    run = GRPORun(parity_env, config)
    result = run.train()
    assert run.seeds["grpo"] == [0, 7, 14, 21] and run.seeds["heldout"] == [2_000_005, 2_000_012, 2_000_019]
    held = [r for r in run.rows if r.phase == "heldout"]
    assert held and all(r.rollouts == 3 for r in held)
    alone = evaluate_adapter(parity_env, config, result.adapter_dir)
    assert alone.seeds == run.seeds["heldout"] and sorted(alone.rewards) == run.seeds["heldout"]


def test_max_steps_caps_every_episode_and_it_is_graded(parity_env) -> None:
    from trainer.envpool import EnvPool

    with EnvPool(parity_env, sandbox="bwrap", max_steps=1) as pool:
        first = pool.reset([0], [3])[0]
        assert first.reply is not None
        after = pool.step([0], ["Let me check that for you."])[0]
    assert after.reply is not None and after.reply.truncated and not after.reply.terminated
    assert after.reply.reward_components  # graded where it stopped, not dropped
