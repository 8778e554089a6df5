"""Selection statistics, exactly as in the TRACE paper, plus bootstrap intervals and overlap.

For one capability in one labeling run, over trajectories labeled NA / PRESENT / LACKING:

- ER+ = #LACKING among successes / #successes labeled PRESENT or LACKING (NA excluded from the denominator)
- ER− = #LACKING among failures / #failures labeled PRESENT or LACKING
- Δ = ER− − ER+ (undefined when either rate is)
- coverage = #failures labeled LACKING / #ALL failures (NA included in the denominator)

A run selects a capability when Δ ≥ δ and coverage ≥ ρ (compared with a 1e-9 tolerance so that a hand-set
threshold such as 0.2 is met by a gap that float arithmetic computes as 0.19999999999999996). A capability
is kept when at least K of the N runs select it.

Beyond the paper: percentile bootstrap intervals for the run-averaged Δ and coverage, resampling
trajectories with replacement within successes and within failures (so group sizes stay fixed), and the
pairwise overlap of capabilities on failed trajectories (majority label over runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from schemas.capability import CapabilityLabel, CapabilityOverlap, CapabilityStats, Interval, RunFigures, TrajectoryLabel

EPS = 1e-9
NA_CODE, PRESENT_CODE, LACKING_CODE = 0, 1, 2
_CODES = {CapabilityLabel.NA: NA_CODE, CapabilityLabel.PRESENT: PRESENT_CODE, CapabilityLabel.LACKING: LACKING_CODE}


@dataclass
class LabelMatrix:
    """``codes[run, capability, trajectory]``; a missing label counts as NA."""

    trajectory_ids: list[str]
    success: np.ndarray  # bool, per trajectory
    capabilities: list[str]
    codes: np.ndarray  # int8, (runs, capabilities, trajectories)

    @classmethod
    def build(
        cls, outcomes: dict[str, bool], capabilities: list[str], runs: list[list[TrajectoryLabel]]
    ) -> "LabelMatrix":
        ids = list(outcomes)
        t_index = {tid: i for i, tid in enumerate(ids)}
        c_index = {name: i for i, name in enumerate(capabilities)}
        codes = np.zeros((len(runs), len(capabilities), len(ids)), dtype=np.int8)
        for r, labels in enumerate(runs):
            for label in labels:
                t, c = t_index.get(label.trajectory_id), c_index.get(label.capability)
                if t is not None and c is not None:
                    codes[r, c, t] = _CODES[label.label]
        success = np.array([outcomes[tid] for tid in ids], dtype=bool)
        return cls(ids, success, list(capabilities), codes)

    @property
    def n_runs(self) -> int:
        return self.codes.shape[0]


def _rate(lacking: int, labeled: int) -> float | None:
    return lacking / labeled if labeled else None


def run_figures(codes: np.ndarray, success: np.ndarray, delta: float, rho: float, run: int = 0) -> RunFigures:
    """The paper's figures for one capability in one run. ``codes`` is one row of labels per trajectory."""
    lacking = codes == LACKING_CODE
    labeled = codes != NA_CODE
    failure = ~success
    er_plus = _rate(int(lacking[success].sum()), int(labeled[success].sum()))
    er_minus = _rate(int(lacking[failure].sum()), int(labeled[failure].sum()))
    gap = er_minus - er_plus if er_plus is not None and er_minus is not None else None
    n_failures = int(failure.sum())
    coverage = int(lacking[failure].sum()) / n_failures if n_failures else 0.0
    selected = gap is not None and gap >= delta - EPS and coverage >= rho - EPS
    return RunFigures(run=run, er_success=er_plus, er_failure=er_minus, gap=gap, coverage=coverage, selected=selected)


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def bootstrap_intervals(
    matrix: LabelMatrix, samples: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, tuple[Interval | None, Interval | None]]:
    """Per capability: (interval for run-averaged Δ, interval for run-averaged coverage)."""
    out: dict[str, tuple[Interval | None, Interval | None]] = {c: (None, None) for c in matrix.capabilities}
    if samples <= 0:
        return out
    rng = np.random.default_rng(seed)
    s_idx = np.flatnonzero(matrix.success)
    f_idx = np.flatnonzero(~matrix.success)
    n_s, n_f = len(s_idx), len(f_idx)
    weights_s = rng.multinomial(n_s, np.full(n_s, 1.0 / n_s), size=samples).astype(np.float64) if n_s else None
    weights_f = rng.multinomial(n_f, np.full(n_f, 1.0 / n_f), size=samples).astype(np.float64) if n_f else None
    tail = (1.0 - level) / 2.0 * 100.0

    def interval(values: np.ndarray) -> Interval | None:
        values = values[~np.isnan(values)]
        if values.size == 0:
            return None
        low, high = np.percentile(values, [tail, 100.0 - tail])
        return Interval(low=float(low), high=float(high), level=level)

    with np.errstate(invalid="ignore", divide="ignore"):
        for c, name in enumerate(matrix.capabilities):
            codes = matrix.codes[:, c, :]  # (runs, trajectories)
            gap_ci = cov_ci = None
            if weights_f is not None:
                lack_f = weights_f @ (codes[:, f_idx] == LACKING_CODE).T.astype(np.float64)  # (samples, runs)
                lab_f = weights_f @ (codes[:, f_idx] != NA_CODE).T.astype(np.float64)
                cov_ci = interval((lack_f / n_f).mean(axis=1))
                if weights_s is not None:
                    lack_s = weights_s @ (codes[:, s_idx] == LACKING_CODE).T.astype(np.float64)
                    lab_s = weights_s @ (codes[:, s_idx] != NA_CODE).T.astype(np.float64)
                    gaps = np.where(lab_f > 0, lack_f / lab_f, np.nan) - np.where(lab_s > 0, lack_s / lab_s, np.nan)
                    defined = ~np.isnan(gaps)
                    sums = np.where(defined, gaps, 0.0).sum(axis=1)
                    counts = defined.sum(axis=1)
                    gap_ci = interval(np.where(counts > 0, sums / np.maximum(counts, 1), np.nan))
            out[name] = (gap_ci, cov_ci)
    return out


def capability_statistics(
    matrix: LabelMatrix,
    *,
    delta: float = 0.20,
    rho: float = 0.10,
    min_runs: int = 8,
    bootstrap: int = 1000,
    seed: int = 0,
) -> list[CapabilityStats]:
    """Per-run figures, the K-of-N decision and bootstrap intervals for every capability."""
    if min_runs < 1 or min_runs > matrix.n_runs:
        raise ValueError(f"min_runs (K) must be between 1 and the number of runs ({matrix.n_runs}), got {min_runs}")
    intervals = bootstrap_intervals(matrix, bootstrap, seed)
    out = []
    for c, name in enumerate(matrix.capabilities):
        per_run = [run_figures(matrix.codes[r, c, :], matrix.success, delta, rho, run=r) for r in range(matrix.n_runs)]
        selected_runs = sum(1 for f in per_run if f.selected)
        gap_ci, cov_ci = intervals[name]
        out.append(
            CapabilityStats(
                capability=name,
                er_success=_mean([f.er_success for f in per_run]),
                er_failure=_mean([f.er_failure for f in per_run]),
                gap=_mean([f.gap for f in per_run]),
                coverage=float(np.mean([f.coverage for f in per_run])) if per_run else 0.0,
                selected_runs=selected_runs,
                total_runs=matrix.n_runs,
                selected=selected_runs >= min_runs,
                gap_ci=gap_ci,
                coverage_ci=cov_ci,
                per_run=per_run,
                n_successes=int(matrix.success.sum()),
                n_failures=int((~matrix.success).sum()),
            )
        )
    return out


def majority_lacking(matrix: LabelMatrix) -> np.ndarray:
    """(capabilities, trajectories): LACKING in more than half of the runs."""
    return (matrix.codes == LACKING_CODE).sum(axis=0) * 2 > matrix.n_runs


def overlap(matrix: LabelMatrix, capabilities: list[str] | None = None) -> list[CapabilityOverlap]:
    """Pairwise co-occurrence of LACKING on failed trajectories."""
    names = capabilities if capabilities is not None else matrix.capabilities
    lacking = majority_lacking(matrix)[:, ~matrix.success]
    index = {name: i for i, name in enumerate(matrix.capabilities)}
    out = []
    for a, b in combinations(names, 2):
        la, lb = lacking[index[a]], lacking[index[b]]
        both, either = int((la & lb).sum()), int((la | lb).sum())
        out.append(CapabilityOverlap(a=a, b=b, both=both, either=either, jaccard=both / either if either else 0.0))
    return out


def failures_covered(matrix: LabelMatrix, capabilities: list[str]) -> int:
    """Failures on which at least one of the given capabilities is (majority) LACKING."""
    if not capabilities:
        return 0
    index = [matrix.capabilities.index(c) for c in capabilities]
    lacking = majority_lacking(matrix)[index][:, ~matrix.success]
    return int(lacking.any(axis=0).sum())


def example_failures(matrix: LabelMatrix, capability: str, limit: int = 5) -> list[str]:
    """Failed trajectories most often labeled LACKING for a capability (ties by id)."""
    c = matrix.capabilities.index(capability)
    counts = (matrix.codes[:, c, :] == LACKING_CODE).sum(axis=0)
    ranked = sorted(
        (int(-counts[t]), matrix.trajectory_ids[t]) for t in np.flatnonzero(~matrix.success) if counts[t] > 0
    )
    return [tid for _, tid in ranked[:limit]]
