"""The gate's seeds go where training goes: near each window's start and across the whole window (issue 33/32)."""

from __future__ import annotations

import math
from collections import Counter

from factory.validation.checks.context import SMALL_OFFSET, draw_seeds, training_windows, window_spans


def _pairs(seeds: list[int]) -> list[int]:
    return [a for a, b in zip(seeds, seeds[1:]) if b == a + 1]


def test_training_pairs_reach_every_decade_of_the_window_log_uniformly() -> None:
    windows = training_windows()
    spans = window_spans(windows)
    assert spans["grpo"] == windows["warm_start"] - windows["grpo"] and spans["heldout"] >= SMALL_OFFSET * 2
    offsets: list[int] = []
    for run_seed in range(300):
        for start in _pairs(draw_seeds(run_seed, 0, 16)):
            base = max(b for b in windows.values() if b <= start)
            offsets.append(start - base)
    assert len(offsets) >= 300 * 3
    small = sum(o < SMALL_OFFSET for o in offsets) / len(offsets)
    assert 0.4 < small < 0.6  # half where every run starts
    deep = [o for o in offsets if o >= SMALL_OFFSET]
    decades = Counter(int(math.log10(o)) for o in deep)
    # log-uniform from 16 to ~1e6: the decades 100-1e3, 1e3-1e4, 1e4-1e5 and 1e5-1e6 each hold about a fifth
    for decade in (2, 3, 4, 5):
        assert 0.12 < decades[decade] / len(deep) < 0.3, decades
    assert max(deep) > 500_000  # deep inside the window, where a long run or a variant scan goes


def test_a_longer_draw_starts_with_the_shorter_one() -> None:
    """A sequential test draws more seeds by drawing longer: the first seeds keep their place, the rest are new."""
    for run_seed in (0, 7, 12345):
        short, long = draw_seeds(run_seed, 0, 128), draw_seeds(run_seed, 0, 512)
        assert long[:128] == short and len(set(long)) == 512
