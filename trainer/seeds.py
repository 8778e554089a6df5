"""Host side: which scenario seeds a run warms up on, trains on and holds out.

Without ``variants`` each window is consecutive seeds from its base (``first_env_seed``,
``warm_start.first_seed``, ``heldout.first_seed``). With ``variants`` (a curriculum on one family of an
env's scenarios, e.g. a blueprint's ``enable_setting_low_battery``) each window keeps the first seeds from
its base whose scenario's ``meta["variant"]`` is listed: the env generates each candidate in its sandbox
and only the variant name comes back (checked as hostile, like every reply). A scan never reaches the next
window's base, so training, warm-start and held-out seeds stay apart whatever the variants' frequency.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from trainer.errors import TrainError

if TYPE_CHECKING:
    from trainer.config import TrainConfig
    from trainer.envpool import EnvPool

SCAN_PER_SEED = 1000
"""A window is scanned for at most this many candidates per wanted seed (a variant rarer than 1 in 1000 is refused)."""


def bases(config: "TrainConfig") -> dict[str, int]:
    return {"grpo": config.first_env_seed, "warm_start": config.warm_start.first_seed, "heldout": config.heldout.first_seed,
            "validation": config.validation.first_seed}


def window(config: "TrainConfig", name: str, count: int, pool: "EnvPool | None" = None) -> list[int]:
    """``count`` seeds of window ``name`` (``grpo``, ``warm_start``, ``heldout`` or ``validation``): consecutive from its base, or
    with ``config.variants`` the first ones whose scenario is of a listed variant (needs ``pool``)."""
    base = bases(config)[name]
    if not config.variants or count == 0:
        return list(range(base, base + count))
    if pool is None:
        raise TrainError("choosing seeds by variant needs the env (internal: no EnvPool given)")
    fence = min([b for b in bases(config).values() if b > base], default=base + count * SCAN_PER_SEED)
    stop = min(fence, base + count * SCAN_PER_SEED)
    wanted, chosen, seen = set(config.variants), [], Counter()
    for seed in range(base, stop):
        variant = pool.scenario_variant(seed)
        seen[variant or "(none)"] += 1
        if variant in wanted:
            chosen.append(seed)
            if len(chosen) == count:
                return chosen
    found = ", ".join(f"{name} ({n})" for name, n in seen.most_common(12)) or "none"
    raise TrainError(
        f"{pool.env_id}: only {len(chosen)} of the {count} {name} seeds wanted are of variant "
        f"{' or '.join(sorted(wanted))} among seeds {base}..{stop - 1}; the variants seen there: {found}. "
        "Fix `variants`, ask for fewer seeds, or move the windows apart")
