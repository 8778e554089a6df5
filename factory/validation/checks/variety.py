"""Determinism across processes, and diversity that survives masking ids and names."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import TypeAdapter

from factory.validation.checks.context import NO_SEEDS, CheckContext
from schemas.validation import CheckResult, Counterexample, SeedSurvey

HASH_SEEDS = (1, 2)
"""PYTHONHASHSEED of the main worker and of the peer it is compared with: string hashing (and so the
iteration order of a set of strings) differs between them, as it does between any two processes."""

_SURVEYS = TypeAdapter(list[SeedSurvey])
_COMPARED = (
    ("the scenario", lambda r: ((r.error or "").split(":")[0], r.fingerprint)),  # an error's text may hold addresses
    ("the first observation", lambda r: r.observation_digest),
    ("the reference transcript", lambda r: r.reference and (r.reference.transcript, r.reference.reward)),
    ("the skipping transcript", lambda r: r.skipping and (r.skipping.transcript, r.skipping.reward)),
    ("the first-message-only transcript", lambda r: r.parrot and (r.parrot.transcript, r.parrot.reward)),
)


def first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where two JSON values first differ, as ``state.users[0].name: 'Ann' != 'Bob'``."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in a or key not in b or a[key] != b[key]:
                return first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{path}[{index}]")
    return f"{path or 'value'}: {repr(a)[:80]} != {repr(b)[:80]}"


def check_determinism(ctx: CheckContext) -> CheckResult:
    """The survey's first seeds, replayed in a second worker that hashes strings differently.

    Both workers make the same calls in the same order from a fresh load, uncached, so only
    nondeterminism can tell them apart: unseeded randomness (on any seed), the clock, and content that
    depends on set iteration order or ``hash()``. State leaking between episodes is the same in both and is
    left to robustness.
    """
    count = min(ctx.config.determinism_seeds, len(ctx.seeds))
    ours = ctx.survey(count)
    if ctx.open_peer is None:
        raise RuntimeError("determinism needs a second worker: CheckContext(open_peer=...)")
    peer = ctx.open_peer(HASH_SEEDS[1])
    try:
        params = {"seeds": [r.seed for r in ours], "parrot_seeds": ctx.config.leak_seeds, "deadline_s": ctx.config.rpc_timeout_s, "masked_seeds": 0}
        theirs = _SURVEYS.validate_python(ctx.call_worker(peer, "survey", params, 2 * ctx.config.rpc_timeout_s))
        by_seed = {r.seed: r for r in theirs}
        for row in ours:
            other = by_seed.get(row.seed)
            if other is None:
                continue
            for what, key in _COMPARED:
                if key(row) != key(other):
                    detail = _explain(ctx, peer, row, what)
                    return CheckResult(
                        name="determinism", passed=False, seeds=len(theirs), episodes=_episodes(theirs),
                        figure=f"{what} of seed {row.seed} differs between two workers",
                        message=f"{what} differs for the same seed in two processes (PYTHONHASHSEED {HASH_SEEDS[0]} vs "
                        f"{HASH_SEEDS[1]}): use only self.rng(seed) for randomness, never the clock, and never let content "
                        "depend on the order of a set of strings or on hash()",
                        counterexample=Counterexample(
                            seed=row.seed, actions=row.reference.turns if row.reference and "transcript" in what else [], detail=detail
                        ),
                        failing_seeds=[r.seed for r in ours if r.seed in by_seed and any(k(r) != k(by_seed[r.seed]) for _, k in _COMPARED)],
                    )
    finally:
        peer.close()
    return CheckResult(
        name="determinism", passed=True, seeds=len(theirs), episodes=_episodes(theirs),
        figure=f"{len(theirs)} seeds identical in two workers (uncached scenarios, first observations, both solutions' transcripts)",
    )


def _episodes(rows: list[SeedSurvey]) -> int:
    """Episodes the peer worker played: both solutions, and the first-message-only agent where it ran."""
    return sum((r.reference is not None) + (r.skipping is not None) + (r.parrot is not None) for r in rows)


def _explain(ctx: CheckContext, peer: Any, row: SeedSurvey, what: str) -> str:
    """Fetch the differing scenario (or transcript) from both workers and name the first difference."""
    try:
        if what == "the scenario" or what == "the first observation":
            params = {"seed": row.seed, "with_scenario": True}
            a = ctx.call_worker(ctx.env.worker, "generate", params, ctx.config.rpc_timeout_s)["scenario"]
            b = ctx.call_worker(peer, "generate", params, ctx.config.rpc_timeout_s)["scenario"]
            return f"generate({row.seed}): {first_difference(a, b)}"
        which = "reference" if "reference" in what else "skipping"
        params = {"seed": row.seed, "policy": which, "with_messages": True, "fresh": True}
        a = ctx.call_worker(ctx.env.worker, "episode", params, ctx.config.rpc_timeout_s)
        b = ctx.call_worker(peer, "episode", params, ctx.config.rpc_timeout_s)
        return f"{which} episode of seed {row.seed}: {first_difference({'messages': a['messages'], 'reward': a['reward']}, {'messages': b['messages'], 'reward': b['reward']})}"
    except Exception as exc:  # the explanation is a courtesy: the verdict stands without it
        return f"(could not fetch both for a diff: {type(exc).__name__})"


def check_diversity(ctx: CheckContext) -> CheckResult:
    c = ctx.config
    rows = ctx.generated(min(c.diversity_seeds, len(ctx.seeds)))
    if len(rows) < 2:
        return CheckResult(name="diversity", passed=False, figure=f"{len(rows)} scenarios", message=NO_SEEDS)
    raw = len({r.fingerprint for r in rows})
    masked = Counter(r.masked_fingerprint for r in rows)
    truths = len({r.masked_truth_digest for r in rows})
    patterns = len({tuple(r.reference.pattern) for r in rows if r.reference is not None})
    share = raw / max(1, len(rows))
    problems, counterexample = [], None
    if share < c.diversity_min_share:
        problems.append(f"only {raw}/{len(rows)} distinct scenarios; vary records, ids, amounts and phrasing by seed")
    if len(masked) < c.diversity_min_masked:
        twins = [r.seed for r in rows if r.masked_fingerprint == masked.most_common(1)[0][0]][:2]
        problems.append(f"with ids and names masked only {len(masked)} distinct scenario(s) remain: seeds differ only in ids or names")
        counterexample = Counterexample(seed=twins[0], detail=f"seeds {twins} are the same scenario once ids and names are masked")
    if truths <= 1:
        problems.append("the ground truth is the same for every seed (ids and names masked)")
    if patterns < c.diversity_min_patterns:
        problems.append(f"the reference solution does the same thing on every seed ({patterns} distinct action pattern(s)); "
                        "vary which rule decides so that the right actions differ")
    return CheckResult(
        name="diversity",
        passed=not problems,
        figure=f"{raw}/{len(rows)} distinct scenarios, {len(masked)} with ids/names masked, {truths} ground truths, "
        f"{patterns} reference action patterns",
        message="; ".join(problems),
        counterexample=counterexample,
        seeds=len(rows),
    )
