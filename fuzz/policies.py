"""Seeded stochastic policies between the reference and the capability-skipping agent.

The GRPO-signal check needs groups of K rollouts that differ the way a learning policy's samples do. A
mixture policy follows the reference, the skipping agent, or replays one of their calls out of order at
each turn, with per-rollout mixing weights; it is driven by ``random.Random(seed)`` so groups replay exactly.
"""

from __future__ import annotations

import random
from typing import Any

FILLER_TEXTS = ("Let me check that for you.", "Is there anything else I should know?", "One moment please.")


def mixture_rollout(reference: list[Any], skipping: list[Any], rng: random.Random, max_turns: int = 16) -> list[Any]:
    p_reference = rng.random()
    p_skip = rng.random() * (1.0 - p_reference)
    pool = [turn for turn in reference + skipping if isinstance(turn, dict) and turn.get("calls")]
    out: list[Any] = []
    ref_i = skip_i = 0
    while len(out) < max_turns and (ref_i < len(reference) or skip_i < len(skipping)):
        roll = rng.random()
        if roll < p_reference and ref_i < len(reference):
            out.append(reference[ref_i])
            ref_i += 1
        elif roll < p_reference + p_skip and skip_i < len(skipping):
            out.append(skipping[skip_i])
            skip_i += 1
        elif pool and rng.random() < 0.7:
            out.append(rng.choice(pool))
            ref_i += rng.random() < 0.5
        else:
            out.append({"content": rng.choice(FILLER_TEXTS), "calls": []})
            ref_i += 1
    return out
