"""bench_learning's protocol helpers: the grid of choices, settings as `--set` reads them, mean and spread, and
the demonstrating warm start refused as a candidate."""

from __future__ import annotations

import argparse

import pytest

from bench.learning_protocol import add_protocol_args, grid, run_protocol, setting, spread


def test_the_grid_is_every_combination_and_bare_words_are_quoted() -> None:
    assert grid(["grpo.lr=1e-4,3e-4", "warm_start.source=skipping,other"]) == [
        {"grpo.lr": "1e-4", "warm_start.source": "skipping"}, {"grpo.lr": "1e-4", "warm_start.source": "other"},
        {"grpo.lr": "3e-4", "warm_start.source": "skipping"}, {"grpo.lr": "3e-4", "warm_start.source": "other"}]
    assert grid([]) == [{}]
    with pytest.raises(SystemExit, match="KEY=V1,V2"):
        grid(["grpo.lr"])
    from trainer.config import load_config

    config = load_config(None, [setting("warm_start.source", "other"), setting("grpo.lr", "3e-4"), setting("grpo.group_size", "6")])
    assert (config.warm_start.source, config.grpo.lr, config.grpo.group_size) == ("other", 3e-4, 6)


def test_mean_and_sample_spread() -> None:
    mean, sd = spread([0.2, 0.4, None, 0.6])
    assert mean == pytest.approx(0.4) and sd == pytest.approx(0.2)
    assert spread([0.5]) == (0.5, 0.0) and spread([None]) == (None, None)


def test_the_demonstrating_warm_start_is_never_a_candidate(tmp_path) -> None:
    parser = argparse.ArgumentParser()
    add_protocol_args(parser)
    args = parser.parse_args(["--choose", "warm_start.source=skipping,reference"])
    with pytest.raises(SystemExit, match="never a candidate"):
        run_protocol(args, "trace/x-v0", [], {}, {"heldout": 4, "iterations": 1}, tmp_path, print)
