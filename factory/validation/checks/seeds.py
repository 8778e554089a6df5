"""Which seeds the gate draws: shaped like training's, near each window's start and across the whole window.

Host side. Re-exported by :mod:`factory.validation.checks.context`, whose :class:`CheckContext` draws them.
"""

from __future__ import annotations

import math
import random

def training_windows() -> dict[str, int]:
    """Where training walks its seeds (``trainer.config`` defaults): GRPO from ``first_env_seed`` (0, 1, 2...),
    warm-start and held-out reference episodes from their own bases, each consecutively."""
    from trainer.config import HeldoutSettings, TrainConfig, WarmStartSettings

    return {"grpo": int(TrainConfig.model_fields["first_env_seed"].default),
            "warm_start": int(WarmStartSettings.model_fields["first_seed"].default),
            "heldout": int(HeldoutSettings.model_fields["first_seed"].default)}


TRAINING_BLOCK = ("grpo", "warm_start", "grpo", "heldout")  # which window each block's consecutive pair comes from
SMALL_OFFSET = 16


def window_spans(windows: dict[str, int]) -> dict[str, int]:
    """How far each training window reaches: up to the next window's base (a variant scan never crosses it,
    ``trainer.seeds``), the last as far as the one before it."""
    ordered = sorted(windows.items(), key=lambda item: item[1])
    spans: dict[str, int] = {}
    for (name, base), following in zip(ordered, ordered[1:] + [None]):
        spans[name] = (following[1] - base) if following else (spans[ordered[-2][0]] if len(ordered) > 1 else 2**20)
    return {name: max(SMALL_OFFSET * 2, span) for name, span in spans.items()}


def draw_seeds(run_seed: int, first_seed: int, count: int) -> list[int]:
    """``count`` distinct seeds in ``[first_seed, 2**31)`` drawn by ``run_seed``, shaped like training's.

    Training walks small consecutive seeds from each window's base (GRPO from 0, warm start and held-out from
    their bases), and a long run, or a curriculum scanning for one variant, goes deep into its window; a gate
    that drew only uniformly from ``[0, 2**31)`` would almost never meet them, so an env lenient on those seeds
    would pass. So in every block of four, two seeds are a consecutive pair inside a training window (GRPO, warm
    start, GRPO, held-out in turn) at an offset below 16 half the time (where every run starts) and else
    log-uniform over the whole window (up to the next window's base: as likely between 16 and 1,000 as between
    1,000 and 60,000), and two are uniform over the whole range: every prefix the checks take (the first 10, 16,
    128 seeds) holds each kind. Offsets and the uniform draws vary with ``run_seed``: no fixed window an env could
    be fitted to. A longer draw with the same arguments starts with the shorter one (a sequential test's further
    seeds are new).
    """
    rng = random.Random(f"trace-gate-seeds:{run_seed}")
    windows = training_windows()
    spans = window_spans(windows)
    seeds: list[int] = []
    taken: set[int] = set()

    def take(seed: int) -> None:
        if len(seeds) < count and first_seed <= seed < 2**31 - 1 and seed not in taken:
            taken.add(seed)
            seeds.append(seed)

    block = 0
    while len(seeds) < count:
        name = TRAINING_BLOCK[block % len(TRAINING_BLOCK)]
        base = max(first_seed, windows[name])
        if rng.random() < 0.5:
            offset = rng.randrange(SMALL_OFFSET)
        else:  # log-uniform over [SMALL_OFFSET, span - 1)
            offset = int(math.exp(rng.uniform(math.log(SMALL_OFFSET), math.log(spans[name] - 1))))
        start = base + offset
        while start in taken or start + 1 in taken:
            start += 2
        take(start)
        take(start + 1)
        for _ in range(2):
            seed = rng.randrange(first_seed, 2**31 - 1)
            while seed in taken:
                seed = rng.randrange(first_seed, 2**31 - 1)
            take(seed)
        block += 1
    return seeds


__all__ = ["SMALL_OFFSET", "TRAINING_BLOCK", "draw_seeds", "training_windows", "window_spans"]
