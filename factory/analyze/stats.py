"""Selection statistics as in the TRACE paper, decided in exact arithmetic, with honest uncertainty.

For one capability in one labeling run, over trajectories labeled NA / PRESENT / LACKING:

- ER+ = #LACKING among successes / #successes labeled PRESENT or LACKING (NA excluded from the denominator)
- ER− = #LACKING among failures / #failures labeled PRESENT or LACKING
- Δ = ER− − ER+ (undefined when either rate is)
- coverage = #failures labeled LACKING / #failures (NA included in the denominator)

Labels are weighed by their confidence (``TrajectoryLabel.confidence``; an LLM's labels carry 1.0, so for
them the figures are plain counts): a LACKING label of confidence 0.7 adds 0.7 to the lacking count and to
the labeled count. Failures that are not the agent's fault (``attribution``) are left out of the failures
unless asked. A run selects a capability when Δ ≥ δ and coverage ≥ ρ, compared as exact fractions (δ = 0.20
is 1/5, so 0.199 never passes); a capability is kept when at least K of the N runs select it. A
deterministic labeler runs once, since repeating it would only repeat its labels; its K of N is taken over N
resamples of the tasks instead (``resamples``): a capability is kept when at least K of N resampled task
sets select it, so a selection that rests on a few tasks does not survive.

Intervals are percentile bootstrap intervals of the run-averaged Δ and coverage. When a task appears more
than once (trials, or several agents on the same task) its trajectories are not independent, so the
bootstrap resamples tasks (clusters) with all their trajectories; otherwise it resamples trajectories
within successes and within failures.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import numpy as np

from schemas.capability import CapabilityOverlap, CapabilityStats, Interval, RunFigures
from schemas.label_matrix import LACKING_CODE, NA_CODE, LabelMatrix

MIN_SUPPORT = 10
"""Below this many labeled successes or failures, a capability's figures come with a warning."""


def exact(value: float) -> Fraction:
    """The fraction a person meant by a threshold such as 0.2 (its shortest decimal form), not the binary float."""
    return Fraction(repr(float(value)))


def meets(value: Fraction | None, threshold: float) -> bool:
    """``value ≥ threshold`` in exact arithmetic: 1999999999/10^10 does not meet 0.2, 1/5 does."""
    return value is not None and value >= exact(threshold)


def _fraction_or_none(numerator: Fraction, denominator: Fraction) -> Fraction | None:
    return numerator / denominator if denominator else None


def _exact_sum(values: np.ndarray) -> Fraction:
    """A sum of confidences (or counts) as an exact fraction: integers stay integers, weights their binary value."""
    if not values.size or bool((values == np.round(values)).all()):
        return Fraction(int(np.round(values).sum()))
    return sum((Fraction(float(v)) for v in values if v), Fraction(0))


def run_figures(
    codes: np.ndarray, success: np.ndarray, failures: np.ndarray, delta: float, rho: float, run: int = 0,
    weights: np.ndarray | None = None, multiplicity: np.ndarray | None = None,
) -> RunFigures:  # fmt: skip
    """The paper's figures for one capability in one run, and the selection decided in exact fractions. Each
    label counts its confidence (``weights``) times how often its trajectory is drawn (``multiplicity``, for a
    resample of the tasks)."""
    lacking, labeled = codes == LACKING_CODE, codes != NA_CODE
    n_s_lab, n_f_lab = int(labeled[success].sum()), int(labeled[failures].sum())
    w = np.ones(codes.shape) if weights is None else weights
    m = np.ones(codes.shape) if multiplicity is None else multiplicity
    lack_w, lab_w = lacking * w * m, labeled * w * m
    er_plus = _fraction_or_none(_exact_sum(lack_w[success]), _exact_sum(lab_w[success]))
    er_minus = _fraction_or_none(_exact_sum(lack_w[failures]), _exact_sum(lab_w[failures]))
    gap = er_minus - er_plus if er_plus is not None and er_minus is not None else None
    n_failures = _exact_sum(m[failures])
    coverage = _exact_sum(lack_w[failures]) / n_failures if n_failures else Fraction(0)
    selected = meets(gap, delta) and meets(coverage, rho)
    as_float = (lambda x: None if x is None else float(x))  # noqa: E731
    return RunFigures(
        run=run, er_success=as_float(er_plus), er_failure=as_float(er_minus), gap=as_float(gap), coverage=float(coverage),
        selected=selected, n_success_labeled=n_s_lab, n_failure_labeled=n_f_lab,
    )  # fmt: skip


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _weights(matrix: LabelMatrix, samples: int, rng: np.random.Generator) -> np.ndarray:
    """(samples, trajectories) multiplicities of each trajectory in each resample."""
    n = len(matrix.trajectory_ids)
    weights = np.zeros((samples, n))
    if matrix.clustered:
        kept = np.flatnonzero(matrix.success | matrix.failures)
        clusters = np.unique(matrix.clusters[kept])
        draws = rng.multinomial(clusters.size, np.full(clusters.size, 1.0 / clusters.size), size=samples)
        weights[:, kept] = draws[:, np.searchsorted(clusters, matrix.clusters[kept])]
        return weights
    for group in (np.flatnonzero(matrix.success), np.flatnonzero(matrix.failures)):
        if group.size:
            weights[:, group] = rng.multinomial(group.size, np.full(group.size, 1.0 / group.size), size=samples)
    return weights


def bootstrap_intervals(
    matrix: LabelMatrix, samples: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, tuple[Interval | None, Interval | None]]:
    """Per capability: (interval for run-averaged Δ, interval for run-averaged coverage)."""
    out: dict[str, tuple[Interval | None, Interval | None]] = {c: (None, None) for c in matrix.capabilities}
    if samples <= 0 or not len(matrix.trajectory_ids):
        return out
    weights = _weights(matrix, samples, np.random.default_rng(seed))
    w_s, w_f = weights * matrix.success, weights * matrix.failures
    n_f = w_f.sum(axis=1)  # failures in each resample (varies when clusters are resampled)
    tail = (1.0 - level) / 2.0 * 100.0

    def interval(values: np.ndarray) -> Interval | None:
        values = values[~np.isnan(values)]
        if values.size == 0:
            return None
        low, high = np.percentile(values, [tail, 100.0 - tail])
        return Interval(low=float(low), high=float(high), level=level)

    with np.errstate(invalid="ignore", divide="ignore"):
        for c, name in enumerate(matrix.capabilities):
            confidence = np.ones(matrix.codes[:, c, :].shape) if matrix.weights is None else matrix.weights[:, c, :]
            lacking = ((matrix.codes[:, c, :] == LACKING_CODE) * confidence).T  # (trajectories, runs), confidence-weighted
            labeled = ((matrix.codes[:, c, :] != NA_CODE) * confidence).T
            lack_f, lab_f, lack_s, lab_s = w_f @ lacking, w_f @ labeled, w_s @ lacking, w_s @ labeled
            coverage = np.where(n_f[:, None] > 0, lack_f / n_f[:, None], np.nan).mean(axis=1)
            gaps = np.where(lab_f > 0, lack_f / lab_f, np.nan) - np.where(lab_s > 0, lack_s / lab_s, np.nan)
            defined = ~np.isnan(gaps)
            counts = defined.sum(axis=1)
            gap_mean = np.where(counts > 0, np.where(defined, gaps, 0.0).sum(axis=1) / np.maximum(counts, 1), np.nan)
            out[name] = (interval(gap_mean), interval(coverage))
    return out


def capability_statistics(
    matrix: LabelMatrix,
    *,
    delta: float = 0.20,
    rho: float = 0.10,
    min_runs: int = 8,
    bootstrap: int = 1000,
    seed: int = 0,
    resamples: int = 0,
) -> list[CapabilityStats]:
    """Per-run figures, the K-of-N decision, bootstrap intervals and support for every capability. With
    ``resamples`` = N (one labeling run only), K of N counts resamples of the tasks instead of runs."""
    total = resamples if resamples else matrix.n_runs
    if resamples and matrix.n_runs != 1:
        raise ValueError("resampled selection is for a deterministic labeler's single run")
    if min_runs < 1 or min_runs > total:
        raise ValueError(f"min_runs (K) must be between 1 and the number of {'resamples' if resamples else 'runs'} ({total}), got {min_runs}")
    intervals = bootstrap_intervals(matrix, bootstrap, seed)
    draws = _weights(matrix, resamples, np.random.default_rng([seed, 1])) if resamples else None
    out = []
    for c, name in enumerate(matrix.capabilities):
        per_run = [run_figures(matrix.codes[r, c, :], matrix.success, matrix.failures, delta, rho, run=r, weights=matrix.label_weights(r, c))
                   for r in range(matrix.n_runs)]  # fmt: skip
        if draws is not None:
            chosen = [run_figures(matrix.codes[0, c, :], matrix.success, matrix.failures, delta, rho, weights=matrix.label_weights(0, c),
                                  multiplicity=draws[i]).selected for i in range(resamples)]  # fmt: skip
        else:
            chosen = [f.selected for f in per_run]
        selected_runs = sum(chosen)
        gap_ci, cov_ci = intervals[name]
        n_s = min(f.n_success_labeled for f in per_run)
        n_f = min(f.n_failure_labeled for f in per_run)
        thin = [f"{n} labeled {what}" for n, what in ((n_s, "successes"), (n_f, "failures")) if n < MIN_SUPPORT]
        out.append(
            CapabilityStats(
                capability=name,
                er_success=_mean([f.er_success for f in per_run]),
                er_failure=_mean([f.er_failure for f in per_run]),
                gap=_mean([f.gap for f in per_run]),
                coverage=float(np.mean([f.coverage for f in per_run])) if per_run else 0.0,
                selected_runs=selected_runs,
                total_runs=total,
                selected=selected_runs >= min_runs,
                gap_ci=gap_ci,
                coverage_ci=cov_ci,
                per_run=per_run,
                n_successes=int(matrix.success.sum()),
                n_failures=int(matrix.failures.sum()),
                n_success_labeled=n_s,
                n_failure_labeled=n_f,
                support_warning=(f"only {' and '.join(thin)} (fewer than {MIN_SUPPORT}): treat these figures as anecdotes" if thin else None),
            )
        )
    return out


def majority_lacking(matrix: LabelMatrix) -> np.ndarray:
    """(capabilities, trajectories): LACKING in more than half of the runs."""
    return (matrix.codes == LACKING_CODE).sum(axis=0) * 2 > matrix.n_runs


def overlap(matrix: LabelMatrix, capabilities: list[str] | None = None) -> list[CapabilityOverlap]:
    """Pairwise co-occurrence of LACKING on the failures that enter the statistics."""
    names = capabilities if capabilities is not None else matrix.capabilities
    lacking = majority_lacking(matrix)[:, matrix.failures]
    index = {name: i for i, name in enumerate(matrix.capabilities)}
    out = []
    for a, b in combinations(names, 2):
        la, lb = lacking[index[a]], lacking[index[b]]
        both, either = int((la & lb).sum()), int((la | lb).sum())
        out.append(CapabilityOverlap(a=a, b=b, both=both, either=either, jaccard=both / either if either else 0.0))
    return out


def failures_covered(matrix: LabelMatrix, capabilities: list[str]) -> int:
    """Counted failures on which at least one of the given capabilities is (majority) LACKING."""
    if not capabilities:
        return 0
    index = [matrix.capabilities.index(c) for c in capabilities]
    return int(majority_lacking(matrix)[index][:, matrix.failures].any(axis=0).sum())


def example_failures(matrix: LabelMatrix, capability: str, limit: int = 5) -> list[str]:
    """Counted failures most often labeled LACKING for a capability (ties by id)."""
    c = matrix.capabilities.index(capability)
    counts = (matrix.codes[:, c, :] == LACKING_CODE).sum(axis=0)
    ranked = sorted((int(-counts[t]), matrix.trajectory_ids[t]) for t in np.flatnonzero(matrix.failures) if counts[t] > 0)
    return [tid for _, tid in ranked[:limit]]
