"""The labels of a labeling run as one array: ``codes[run, capability, trajectory]``.

The capability statistics (``factory.analyze.stats``) and the router's accuracy check (``router.evaluate``)
read the same labels; the matrix lives here, below both, so the router does not import the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from schemas.capability import CapabilityLabel, TrajectoryLabel

NA_CODE, PRESENT_CODE, LACKING_CODE = 0, 1, 2
_CODES = {CapabilityLabel.NA: NA_CODE, CapabilityLabel.PRESENT: PRESENT_CODE, CapabilityLabel.LACKING: LACKING_CODE}


@dataclass
class LabelMatrix:
    """``codes[run, capability, trajectory]``; a missing label counts as NA. ``counted`` marks the
    trajectories that enter the statistics (successes, and failures attributable to the agent)."""

    trajectory_ids: list[str]
    success: np.ndarray
    capabilities: list[str]
    codes: np.ndarray
    counted: np.ndarray
    clusters: np.ndarray  # int cluster (task) index per trajectory
    weights: np.ndarray | None = None  # confidence per label, like ``codes``; None: every label weighs 1

    @classmethod
    def build(
        cls,
        outcomes: dict[str, bool],
        capabilities: list[str],
        runs: list[list[TrajectoryLabel]],
        *,
        counted: dict[str, bool] | None = None,
        clusters: dict[str, str] | None = None,
    ) -> "LabelMatrix":
        ids = list(outcomes)
        t_index = {tid: i for i, tid in enumerate(ids)}
        c_index = {name: i for i, name in enumerate(capabilities)}
        codes = np.zeros((len(runs), len(capabilities), len(ids)), dtype=np.int8)
        weights = np.ones(codes.shape, dtype=np.float64)
        for r, labels in enumerate(runs):
            for label in labels:
                t, c = t_index.get(label.trajectory_id), c_index.get(label.capability)
                if t is not None and c is not None:
                    codes[r, c, t] = _CODES[label.label]
                    weights[r, c, t] = label.confidence
        keys = [(clusters or {}).get(tid, tid) for tid in ids]
        key_index = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        return cls(
            ids,
            np.array([outcomes[tid] for tid in ids], dtype=bool),
            list(capabilities),
            codes,
            np.array([(counted or {}).get(tid, True) for tid in ids], dtype=bool),
            np.array([key_index[k] for k in keys], dtype=np.int64),
            None if bool((weights == 1.0).all()) else weights,
        )

    def label_weights(self, run: int, capability: int) -> np.ndarray:
        """Confidence of each trajectory's label for one run and capability (ones when none was given)."""
        return np.ones(self.codes.shape[2]) if self.weights is None else self.weights[run, capability]

    @property
    def n_runs(self) -> int:
        return self.codes.shape[0]

    @property
    def failures(self) -> np.ndarray:
        """Failures that enter the statistics."""
        return ~self.success & self.counted

    @property
    def clustered(self) -> bool:
        """Whether some task has several trajectories among those counted."""
        kept = self.clusters[self.success | self.failures]
        return kept.size > np.unique(kept).size
