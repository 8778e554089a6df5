"""The gate's statistics: intervals that cover at their stated rate, decisions with three outcomes, sequential looks."""

from __future__ import annotations

import math
import random

import pytest

from factory.validation import stats, thresholds
from schemas.validation import ValidationConfig


def test_special_functions_match_known_values() -> None:
    # I_x(a, b) for integer a, b is a binomial tail: I_0.3(2, 3) = P(Bin(4, 0.3) >= 2)
    tail = sum(math.comb(4, j) * 0.3**j * 0.7 ** (4 - j) for j in range(2, 5))
    assert stats.betainc(2, 3, 0.3) == pytest.approx(tail, abs=1e-12)
    assert stats.t_ppf(0.975, 10) == pytest.approx(2.228138852, abs=1e-6)
    assert stats.t_ppf(0.95, 1) == pytest.approx(6.313751515, abs=1e-6)
    assert stats.t_ppf(0.025, 30) == pytest.approx(-2.042272456, abs=1e-6)


def test_clopper_pearson_bounds_are_the_exact_binomial_tails() -> None:
    low, high = stats.clopper_pearson(3, 20, 0.025)
    # at the bounds, the observed count is exactly as (un)likely as alpha
    assert sum(math.comb(20, j) * low**j * (1 - low) ** (20 - j) for j in range(3, 21)) == pytest.approx(0.025, abs=1e-9)
    assert sum(math.comb(20, j) * high**j * (1 - high) ** (20 - j) for j in range(0, 4)) == pytest.approx(0.025, abs=1e-9)
    assert stats.clopper_pearson(0, 10, 0.05)[0] == 0.0 and stats.clopper_pearson(10, 10, 0.05)[1] == 1.0
    assert stats.clopper_pearson(10, 10, 0.05)[0] == pytest.approx(0.05 ** (1 / 10), abs=1e-9)


@pytest.mark.parametrize("p,n", [(0.05, 30), (0.5, 20), (0.9, 128), (0.3, 10)])
def test_share_bounds_cover_at_their_stated_rate(p: float, n: int) -> None:
    """By simulation: each one-sided bound is wrong at most alpha of the time (Clopper-Pearson is conservative)."""
    rng, alpha, runs = random.Random(f"cover:{p}:{n}"), 0.05, 1500
    below = above = 0
    for _ in range(runs):
        k = sum(rng.random() < p for _ in range(n))
        low, high = stats.clopper_pearson(k, n, alpha)
        below += low > p
        above += high < p
    slack = 3 * math.sqrt(alpha * (1 - alpha) / runs)  # three standard errors of the simulated rate
    assert below / runs <= alpha + slack and above / runs <= alpha + slack


@pytest.mark.parametrize("make", [lambda r: r.random(), lambda r: float(r.random() < 0.4), lambda r: r.betavariate(0.5, 2)])
def test_ratio_bounds_cover_near_their_stated_rate(make) -> None:  # type: ignore[no-untyped-def]
    """An exploit's reward over the reference's (paired per seed), 30 seeds: the t bounds hold near alpha."""
    rng, alpha, runs = random.Random("ratio"), 0.05, 800
    big = [make(rng) for _ in range(200_000)]
    truth = sum(big) / len(big) / 0.995  # references pay 0.99 or 1.0, mean 0.995
    wrong = 0
    for _ in range(runs):
        nums = [make(rng) for _ in range(30)]
        dens = [rng.choice([0.99, 1.0]) for _ in range(30)]
        _, low, high = stats.ratio_interval(nums, dens, alpha)
        wrong += (low > truth) + (high < truth)
    assert wrong / runs <= 2 * alpha + 0.03


def test_decisions_have_three_outcomes_and_name_the_interval() -> None:
    assert stats.decide_share(90, 100, 0.5, "max", 0.01).outcome == "fail"
    assert stats.decide_share(10, 100, 0.5, "max", 0.01).outcome == "pass"
    middle = stats.decide_share(49, 100, 0.5, "max", 0.01)
    assert middle.outcome == "inconclusive" and middle.low < 0.5 < middle.high
    assert middle.text().startswith("share 0.49 [0.3") and middle.text().endswith("against at most 0.50")
    assert stats.decide_share(120, 128, 0.9, "min", 0.01).outcome == "inconclusive"
    assert stats.decide_share(128, 128, 0.9, "min", 0.01).outcome == "pass"
    # "every seed": exact; one failing seed is a proof, none a pass
    assert stats.decide_share(127, 128, 1.0, "min", 0.01).outcome == "fail"
    assert stats.decide_share(5, 5, 1.0, "min", 0.01).outcome == "pass"
    # a constant exploit share exactly at the line passes, as the point rule did
    assert stats.decide_ratio([0.5] * 10, [1.0] * 10, 0.5, "max", 0.01).outcome == "pass"
    assert stats.decide_ratio([0.6] * 10, [1.0] * 10, 0.5, "max", 0.01).outcome == "fail"


def test_sequential_stops_at_the_first_look_that_clears_and_keeps_its_error_rate() -> None:
    assert stats.looks(10, 80) == [10, 20, 40, 80] and stats.looks(16, 16) == [16]
    # a clear env decides on the first look; an env on the line is inconclusive at the cap
    first = stats.sequential([(0, 10), (0, 20)], 0.5, "max", 0.05, 4)
    assert first.outcome == "pass" and first.n == 10
    rng, alpha, runs, wrong_fail = random.Random("seq"), 0.05, 600, 0
    for _ in range(runs):  # true share exactly at the threshold: a fail is a wrong verdict
        draws = [rng.random() < 0.5 for _ in range(80)]
        counts = [(sum(draws[:n]), n) for n in stats.looks(10, 80)]
        wrong_fail += stats.sequential(counts, 0.5, "max", alpha, 4).outcome == "fail"
    assert wrong_fail / runs <= alpha
    with pytest.raises(ValueError):
        stats.sequential([(1, 2)] * 5, 0.5, "max", alpha, 4)


def test_thresholds_table_names_real_config_fields_and_gives_the_rerun_line() -> None:
    config = ValidationConfig()
    for entry in thresholds.THRESHOLDS.values():
        assert entry.field in ValidationConfig.model_fields and entry.seeds_field in ValidationConfig.model_fields
    decision = thresholds.judge_share(config, "exploit_max_match_share", 0, 3)
    assert decision.outcome == "pass"  # nothing against it
    unsure = thresholds.judge_ratio(config, "exploit_max_share", [0.4, 0.6, 0.5, 0.45, 0.55], [1.0] * 5)
    assert unsure.outcome == "inconclusive"
    line = thresholds.inconclusive_message(config, "exploit_max_share", unsure, "always_agree")
    assert line.startswith("inconclusive: always_agree: mean reward share 0.50 [") and "rerun with --set max_seeds=1024" in line


@pytest.mark.parametrize("threshold", [0.5, 0.75, 0.9, 0.95])
def test_no_look_is_taken_where_the_share_could_not_pass(threshold: float) -> None:
    """A look below the fewest seeds an all-pass clears the threshold on can only fail or stay inconclusive: it is
    moved up to that many; the schedule never gains a look, so the Bonferroni split planned for it holds."""
    alpha = thresholds.ALPHA_PER_LOOK
    need = stats.fewest_to_pass(threshold, alpha)
    assert stats.decide_share(need, need, threshold, "min", alpha).outcome == "pass"
    assert stats.decide_share(need - 1, need - 1, threshold, "min", alpha).outcome == "inconclusive"
    schedule = stats.looks(8, 128, factor=4)
    moved = stats.passable_looks(schedule, threshold, alpha)
    assert len(moved) <= len(schedule) and moved[-1] == schedule[-1] and moved == sorted(moved)
    assert all(n >= min(need, schedule[-1]) for n in moved) and set(moved) - {min(need, 128)} <= set(schedule)


def test_reward_sensitivity_first_looks_where_it_can_pass() -> None:
    config = ValidationConfig()
    assert thresholds.passable(config, "sensitivity_min_share", stats.looks(8, 128, factor=4)) == [16, 32, 128]
    assert thresholds.passable(config, "exploit_max_share", [8, 32]) == [8, 32]  # a max side: unchanged
