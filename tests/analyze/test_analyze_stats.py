"""The selection statistics, pinned on hand-computed examples: NA handling, coverage, exact thresholds, K of N,
support counts, not-attributable failures, and intervals that resample tasks when tasks repeat."""

from __future__ import annotations

import numpy as np
import pytest

from fractions import Fraction

from schemas.label_matrix import LabelMatrix
from factory.analyze.stats import capability_statistics, exact, failures_covered, meets, overlap, run_figures
from schemas.capability import CapabilityLabel, TrajectoryLabel

L, P, N = CapabilityLabel.LACKING, CapabilityLabel.PRESENT, CapabilityLabel.NA


def labels(capability: str, marks: dict[str, CapabilityLabel]) -> list[TrajectoryLabel]:
    return [TrajectoryLabel(trajectory_id=t, capability=capability, label=m) for t, m in marks.items()]


# 4 successes, 5 failures
OUTCOMES = {"s1": True, "s2": True, "s3": True, "s4": True, "f1": False, "f2": False, "f3": False, "f4": False, "f5": False}
EXAMPLE = {"s1": L, "s2": P, "s3": N, "s4": P, "f1": L, "f2": L, "f3": N, "f4": P, "f5": N}


def test_paper_figures_on_a_hand_computed_example():
    matrix = LabelMatrix.build(OUTCOMES, ["x"], [labels("x", EXAMPLE)])
    figures = run_figures(matrix.codes[0, 0], matrix.success, matrix.failures, delta=0.2, rho=0.1)
    # ER+ = 1 lacking / 3 labeled successes (s3 is NA and leaves the denominator), not 1/4
    assert figures.er_success == pytest.approx(1 / 3)
    # ER- = 2 lacking / 3 labeled failures (f3, f5 NA), not 2/5
    assert figures.er_failure == pytest.approx(2 / 3)
    assert figures.gap == pytest.approx(1 / 3)
    # coverage counts ALL failures in the denominator, NA ones included: 2/5, not 2/3
    assert figures.coverage == pytest.approx(2 / 5)
    assert figures.selected
    assert (figures.n_success_labeled, figures.n_failure_labeled) == (3, 3)


def test_missing_labels_count_as_na():
    partial = {k: v for k, v in EXAMPLE.items() if v != N}
    matrix = LabelMatrix.build(OUTCOMES, ["x"], [labels("x", partial)])
    figures = run_figures(matrix.codes[0, 0], matrix.success, matrix.failures, 0.2, 0.1)
    assert (figures.er_success, figures.er_failure, figures.coverage) == pytest.approx((1 / 3, 2 / 3, 2 / 5))


def test_undefined_rates_are_none_and_never_selected():
    all_na_successes = {**EXAMPLE, "s1": N, "s2": N, "s4": N}
    matrix = LabelMatrix.build(OUTCOMES, ["x"], [labels("x", all_na_successes)])
    figures = run_figures(matrix.codes[0, 0], matrix.success, matrix.failures, 0.2, 0.1)
    assert figures.er_success is None and figures.gap is None and not figures.selected
    assert figures.er_failure == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("marks", "selected"),
    [
        # Δ = 0.7 - 0.5 is exactly 1/5 (float arithmetic says 0.19999999999999996): it meets δ = 0.2
        ({**{f"s{i}": (L if i < 5 else P) for i in range(10)}, **{f"f{i}": (L if i < 7 else P) for i in range(10)}}, True),
        # Δ = 0.6 - 0.5 = 0.1 < δ
        ({**{f"s{i}": (L if i < 5 else P) for i in range(10)}, **{f"f{i}": (L if i < 6 else P) for i in range(10)}}, False),
        # Δ = 1.0 but coverage = 1/10 lacking... exactly ρ = 0.1: kept
        ({**{f"s{i}": N for i in range(10)}, "s0": P, **{f"f{i}": N for i in range(10)}, "f0": L}, True),
        # coverage 1/20 < ρ though Δ = 1
        ({**{f"s{i}": P for i in range(10)}, **{f"f{i}": N for i in range(20)}, "f0": L}, False),
        # Δ = 199/1000 is below δ = 0.2: no tolerance turns 0.199 into a pass
        ({**{f"s{i}": P for i in range(1000)}, **{f"f{i}": (L if i < 199 else P) for i in range(1000)}}, False),
        # Δ = 200/1000 = 1/5 exactly: passes
        ({**{f"s{i}": P for i in range(1000)}, **{f"f{i}": (L if i < 200 else P) for i in range(1000)}}, True),
    ],
)
def test_thresholds_on_the_boundary(marks, selected):
    outcomes = {t: t.startswith("s") for t in marks}
    matrix = LabelMatrix.build(outcomes, ["x"], [labels("x", marks)])
    assert run_figures(matrix.codes[0, 0], matrix.success, matrix.failures, delta=0.2, rho=0.1).selected is selected


SELECTING_RUN = {"s1": P, "s2": P, "s3": P, "s4": P, "f1": L, "f2": L, "f3": L, "f4": P, "f5": P}  # Δ 0.6, coverage 0.6
REJECTING_RUN = {"s1": L, "s2": L, "s3": P, "s4": P, "f1": L, "f2": L, "f3": P, "f4": P, "f5": N}  # Δ 0.0


def _run_selecting(selected: bool) -> dict[str, CapabilityLabel]:
    return SELECTING_RUN if selected else REJECTING_RUN


@pytest.mark.parametrize(("hits", "k", "kept"), [(8, 8, True), (7, 8, False), (10, 8, True), (2, 2, True), (1, 2, False)])
def test_k_of_n_rule(hits: int, k: int, kept: bool):
    n = 10 if k == 8 else 3
    runs = [labels("x", _run_selecting(r < hits)) for r in range(n)]
    matrix = LabelMatrix.build(OUTCOMES, ["x"], runs)
    (stats,) = capability_statistics(matrix, delta=0.2, rho=0.1, min_runs=k, bootstrap=0)
    assert stats.selected_runs == hits and stats.total_runs == n
    assert stats.selected is kept
    assert [f.selected for f in stats.per_run] == [r < hits for r in range(n)]


def test_run_averaged_figures():
    runs = [labels("x", _run_selecting(True)), labels("x", _run_selecting(False))]
    matrix = LabelMatrix.build(OUTCOMES, ["x"], runs)
    (stats,) = capability_statistics(matrix, min_runs=1, bootstrap=0)
    # run 1: ER+ 0, ER- 3/5, cov 3/5; run 2: ER+ 2/4, ER- 2/4, cov 2/5
    assert stats.er_success == pytest.approx((0 + 0.5) / 2)
    assert stats.er_failure == pytest.approx((0.6 + 0.5) / 2)
    assert stats.gap == pytest.approx((0.6 + 0.0) / 2)
    assert stats.coverage == pytest.approx((0.6 + 0.4) / 2)


def test_min_runs_above_n_is_rejected():
    matrix = LabelMatrix.build(OUTCOMES, ["x"], [labels("x", EXAMPLE)])
    with pytest.raises(ValueError, match="min_runs"):
        capability_statistics(matrix, min_runs=2)


def test_bootstrap_intervals_bracket_the_estimate_and_are_reproducible():
    rng = np.random.default_rng(1)
    outcomes = {f"t{i}": i < 100 for i in range(300)}
    marks = {t: (L if rng.random() < (0.1 if ok else 0.5) else P) for t, ok in outcomes.items()}
    matrix = LabelMatrix.build(outcomes, ["x"], [labels("x", marks)])
    (a,) = capability_statistics(matrix, min_runs=1, bootstrap=500, seed=3)
    (b,) = capability_statistics(matrix, min_runs=1, bootstrap=500, seed=3)
    assert a.gap_ci == b.gap_ci and a.coverage_ci == b.coverage_ci
    assert a.gap_ci.low < a.gap < a.gap_ci.high and a.gap_ci.high - a.gap_ci.low < 0.3
    assert a.coverage_ci.low < a.coverage < a.coverage_ci.high


def test_bootstrap_of_constant_labels_is_a_point():
    outcomes = {f"t{i}": i < 5 for i in range(10)}
    marks = {t: (P if ok else L) for t, ok in outcomes.items()}
    (stats,) = capability_statistics(LabelMatrix.build(outcomes, ["x"], [labels("x", marks)]), min_runs=1, bootstrap=200)
    assert (stats.gap_ci.low, stats.gap_ci.high) == (1.0, 1.0)
    assert (stats.coverage_ci.low, stats.coverage_ci.high) == (1.0, 1.0)


def test_overlap_and_covered_failures():
    runs = [
        labels("a", {"f1": L, "f2": L, "f3": P, "s1": P}) + labels("b", {"f1": L, "f2": P, "f3": L, "s1": L}),
    ]
    outcomes = {"s1": True, "f1": False, "f2": False, "f3": False, "f4": False}
    matrix = LabelMatrix.build(outcomes, ["a", "b"], runs)
    (pair,) = overlap(matrix)
    assert (pair.a, pair.b, pair.both, pair.either) == ("a", "b", 1, 3)  # s1 is a success: not counted
    assert pair.jaccard == pytest.approx(1 / 3)
    assert failures_covered(matrix, ["a"]) == 2 and failures_covered(matrix, ["a", "b"]) == 3


def test_unattributable_failures_leave_the_statistics_unless_counted():
    marks = {**EXAMPLE, "f3": L, "f5": L}  # f3, f5 lacking, but not the agent's fault
    counted = {t: t not in ("f3", "f5") for t in OUTCOMES}
    matrix = LabelMatrix.build(OUTCOMES, ["x"], [labels("x", marks)], counted=counted)
    figures = run_figures(matrix.codes[0, 0], matrix.success, matrix.failures, 0.2, 0.1)
    assert (figures.er_failure, figures.coverage, figures.n_failure_labeled) == (pytest.approx(2 / 3), pytest.approx(2 / 3), 3)
    everything = LabelMatrix.build(OUTCOMES, ["x"], [labels("x", marks)])
    assert run_figures(everything.codes[0, 0], everything.success, everything.failures, 0.2, 0.1).coverage == pytest.approx(4 / 5)


def test_support_counts_and_warning():
    matrix = LabelMatrix.build(OUTCOMES, ["x"], [labels("x", EXAMPLE)])
    (stats,) = capability_statistics(matrix, min_runs=1, bootstrap=0)
    assert (stats.n_success_labeled, stats.n_failure_labeled) == (3, 3)
    assert "only 3 labeled successes and 3 labeled failures" in stats.support_warning
    many = {f"t{i}": i < 20 for i in range(40)}
    (plenty,) = capability_statistics(LabelMatrix.build(many, ["x"], [labels("x", {t: P for t in many})]), min_runs=1, bootstrap=0)
    assert plenty.support_warning is None


def _widths(matrix: LabelMatrix) -> tuple[float, float]:
    (stats,) = capability_statistics(matrix, min_runs=1, bootstrap=2000, seed=7)
    return stats.gap_ci.high - stats.gap_ci.low, stats.coverage_ci.high - stats.coverage_ci.low


def test_bootstrap_resamples_tasks_when_tasks_repeat():
    """Five identical trials of each of 40 tasks carry no more information than one trial each: resampling
    tasks keeps the interval as wide as for one trial; resampling trials as if independent narrows it."""
    rng = np.random.default_rng(5)
    tasks = {f"task{i}": (i < 20, rng.random() < (0.2 if i < 20 else 0.6)) for i in range(40)}
    once = {name: ok for name, (ok, _) in tasks.items()}
    once_marks = {name: (L if lack else P) for name, (_, lack) in tasks.items()}
    trials = {f"{name}#{k}": ok for name, (ok, _) in tasks.items() for k in range(5)}
    trial_marks = {f"{name}#{k}": (L if lack else P) for name, (_, lack) in tasks.items() for k in range(5)}
    clusters = {tid: tid.split("#")[0] for tid in trials}
    single = _widths(LabelMatrix.build(once, ["x"], [labels("x", once_marks)]))
    clustered = LabelMatrix.build(trials, ["x"], [labels("x", trial_marks)], clusters=clusters)
    assert clustered.clustered
    by_task = _widths(clustered)
    naive = _widths(LabelMatrix.build(trials, ["x"], [labels("x", trial_marks)]))
    for one, grouped, flat in zip(single, by_task, naive):
        assert grouped == pytest.approx(one, rel=0.25)
        assert flat < 0.7 * grouped


def test_thresholds_are_compared_exactly():
    assert exact(0.2) == Fraction(1, 5) and exact(0.1) == Fraction(1, 10)
    assert meets(Fraction(1, 5), 0.2) and meets(Fraction(7, 10) - Fraction(5, 10), 0.2)
    # a tolerance such as the former 1e-9 would let these through
    assert not meets(Fraction(1999999999, 10**10), 0.2) and not meets(Fraction(199, 1000), 0.2)
    assert not meets(None, -1.0)


def weighted(capability: str, marks: dict[str, tuple[CapabilityLabel, float]]) -> list[TrajectoryLabel]:
    return [TrajectoryLabel(trajectory_id=t, capability=capability, label=m, confidence=c) for t, (m, c) in marks.items()]


def test_labels_are_weighed_by_their_confidence():
    """A LACKING label of confidence 0.5 counts half: ER- = (1 + 0.5) / (1 + 0.5 + 1), coverage = 1.5 / 5."""
    marks = {"s1": (P, 1.0), "s2": (P, 1.0), "s3": (N, 1.0), "s4": (P, 1.0),
             "f1": (L, 1.0), "f2": (L, 0.5), "f3": (N, 1.0), "f4": (P, 1.0), "f5": (N, 1.0)}  # fmt: skip
    matrix = LabelMatrix.build(OUTCOMES, ["x"], [weighted("x", marks)])
    figures = run_figures(matrix.codes[0, 0], matrix.success, matrix.failures, 0.2, 0.1, weights=matrix.label_weights(0, 0))
    assert figures.er_failure == pytest.approx(1.5 / 2.5) and figures.coverage == pytest.approx(1.5 / 5)
    assert figures.er_success == 0.0 and figures.n_failure_labeled == 3  # support counts labels, not weights
    (stats,) = capability_statistics(matrix, min_runs=1, bootstrap=0)
    assert stats.coverage == pytest.approx(0.3)
    plain = LabelMatrix.build(OUTCOMES, ["x"], [labels("x", {t: m for t, (m, _) in marks.items()})])
    assert plain.weights is None  # labels without a confidence count 1 each, as before
    assert run_figures(plain.codes[0, 0], plain.success, plain.failures, 0.2, 0.1).coverage == pytest.approx(2 / 5)


def test_a_weak_label_decides_a_threshold_by_its_weight():
    """Coverage 1/10 meets ρ = 0.1 with a full label, not with one of confidence 0.9 (0.09 < 0.1)."""
    outcomes = {**{f"s{i}": True for i in range(10)}, **{f"f{i}": False for i in range(10)}}
    full = {**{f"s{i}": (P, 1.0) for i in range(10)}, **{f"f{i}": (N, 1.0) for i in range(10)}, "f0": (L, 1.0)}
    weak = {**full, "f0": (L, 0.9)}
    for marks, kept in ((full, True), (weak, False)):
        matrix = LabelMatrix.build(outcomes, ["x"], [weighted("x", marks)])
        (stats,) = capability_statistics(matrix, delta=0.2, rho=0.1, min_runs=1, bootstrap=0)
        assert stats.selected is kept


def test_k_of_n_over_resampled_tasks_for_a_deterministic_labeler():
    """One labeling run, N resamples of the tasks: a capability lacking in most failures of many tasks is kept
    in every resample; one whose contrast rests on a single task survives only the resamples that draw it."""
    rng = np.random.default_rng(11)
    outcomes = {f"t{i}#{k}": i < 20 for i in range(40) for k in range(2)}
    clusters = {t: t.split("#")[0] for t in outcomes}
    broad = {t: (L if (not ok and rng.random() < 0.7) or (ok and rng.random() < 0.1) else P) for t, ok in outcomes.items()}
    narrow = {t: (L if t.startswith("t25#") else P) for t in outcomes}  # lacking only on one failed task's two trials
    matrix = LabelMatrix.build(outcomes, ["broad", "narrow"], [labels("broad", broad) + labels("narrow", narrow)], clusters=clusters)
    full = capability_statistics(matrix, delta=0.05, rho=0.05, min_runs=1, bootstrap=0)
    assert [s.selected for s in full] == [True, True]  # on the whole sample both pass
    again = capability_statistics(matrix, delta=0.05, rho=0.05, min_runs=8, bootstrap=0, resamples=10, seed=2)
    assert [(s.total_runs, s.selected) for s in again] == [(10, True), (10, False)]
    assert again[0].selected_runs == 10 and again[1].selected_runs < 8
    assert again == capability_statistics(matrix, delta=0.05, rho=0.05, min_runs=8, bootstrap=0, resamples=10, seed=2)  # seeded
    assert [len(s.per_run) for s in again] == [1, 1]  # the figures stay those of the one labeling run
    with pytest.raises(ValueError, match="resamples"):
        capability_statistics(matrix, min_runs=11, bootstrap=0, resamples=10)
