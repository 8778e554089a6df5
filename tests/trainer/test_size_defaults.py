"""``factory train`` picks learning rate, warm start and group sizes from the model's size; what the user set wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.config import SIZE_DEFAULTS, load_config, model_parameters, size_class, with_size_defaults

TINY = dict(SIZE_DEFAULTS[0][2])
SMALL = dict(SIZE_DEFAULTS[1][2])


def test_the_presets_are_the_benches_that_learnt() -> None:
    """The tiny and SmolLM2 presets of bench/bench_learning.py, key for key."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_learning", Path(__file__).resolve().parents[2] / "bench" / "bench_learning.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    names = {"grpo.lr": "lr", "grpo.groups": "groups", "grpo.group_size": "group_size", "rollout.temperature": "temperature",
             "warm_start.steps": "warm_steps", "warm_start.lr": "warm_lr", "warm_start.batch_size": "warm_batch",
             "warm_start.seeds": "warm_seeds", "warm_start.reference_share": "reference_share"}
    for chosen, preset in ((TINY, bench.PRESETS["tiny"]), (SMALL, bench.PRESETS["smollm2"])):
        for key, value in chosen.items():
            if key in names:
                assert value == preset[names[key]], key


@pytest.mark.parametrize(("parameters", "name"), [(2_100_224, "tiny"), (49_999_999, "tiny"), (50_000_000, "small"),
                                                  (134_515_008, "small"), (999_999_999, "small"), (10**9, "large"),
                                                  (8_000_000_000, "large"), (None, "large")])
def test_size_classes(parameters: int | None, name: str) -> None:
    assert size_class(parameters)[0] == name


def test_unset_keys_take_the_size_defaults() -> None:
    config = load_config(None, [], model="m")
    small, chosen = with_size_defaults(config, 135_000_000)
    assert chosen == SMALL
    assert (small.grpo.lr, small.grpo.groups, small.grpo.group_size, small.rollout.temperature) == (3e-5, 2, 6, 1.0)
    assert (small.warm_start.steps, small.warm_start.lr, small.warm_start.reference_share) == (40, 4e-4, 0.5)
    tiny, _ = with_size_defaults(config, 2_000_000)
    assert (tiny.grpo.lr, tiny.grpo.groups, tiny.grpo.group_size, tiny.warm_start.steps) == (3e-4, 4, 8, 400)
    assert tiny.lora == config.lora  # the adapter's shape is not chosen by size
    large, chosen = with_size_defaults(config, 8 * 10**9)
    assert chosen == {} and large == config  # the paper's recipe: the fields' own defaults


def test_explicit_settings_always_win() -> None:
    config = load_config(None, ["grpo.lr=2e-5", "warm_start.steps=0"], model="m",
                         **{"grpo.groups": 3, "grpo.group_size": None})  # a flag left unset (None) is not a setting
    resolved, chosen = with_size_defaults(config, 135_000_000)
    assert (resolved.grpo.lr, resolved.grpo.groups, resolved.warm_start.steps) == (2e-5, 3, 0)
    assert resolved.grpo.group_size == 6 and "grpo.group_size" in chosen
    assert not {"grpo.lr", "grpo.groups", "warm_start.steps"} & set(chosen)
    # a warm start the user configured is taken whole: its other keys keep the fields' defaults
    assert not [k for k in chosen if k.startswith("warm_start.")] and resolved.warm_start == config.warm_start


def test_a_toml_setting_wins_too(tmp_path: Path) -> None:
    path = tmp_path / "train.toml"
    path.write_text("[grpo]\nlr = 7e-6\n[rollout]\ntemperature = 0.9\n")
    resolved, chosen = with_size_defaults(load_config(path, [], model="m"), 2_000_000)
    assert (resolved.grpo.lr, resolved.rollout.temperature) == (7e-6, 0.9)
    assert "grpo.lr" not in chosen and resolved.grpo.group_size == 8


def test_the_parameter_count_is_read_without_loading_weights(tiny_model: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    exact = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(str(tiny_model), dtype=torch.float32).parameters())
    assert model_parameters(str(tiny_model)) == exact
    assert model_parameters("Qwen/Qwen3-8B") is None  # a hub id: not read (no download), the fields' defaults apply
    assert model_parameters(str(tiny_model.parent / "no-such-model")) is None


def test_factory_train_resolves_them_and_says_so(tiny_model: Path) -> None:
    from factory.cli import train as cli

    settings = load_config(None, ["grpo.lr=1e-4"], model=str(tiny_model))
    resolved, line = cli._size_defaults(settings)  # said by `factory train` once its inputs are checked
    assert resolved.grpo.lr == 1e-4 and resolved.grpo.group_size == 8 and resolved.warm_start.steps == 400
    assert line is not None
    assert line.startswith("defaults for a ") and "(tiny)" in line and "grpo.lr" not in line and "warm_start.steps=400" in line
