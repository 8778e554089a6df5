"""The right behaviour always wins: the truth the reward grades against is the truth the agent can find
(``stale_truth``), and the reference keeps its reward however it is worded (``paraphrase``)."""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

from factory.validation.checks.context import NO_SEEDS, CheckContext
from fuzz.paraphrase import variants
from schemas.validation import CheckResult, Counterexample


def reads_only(turns: list[Any], writes: set[str]) -> list[Any]:
    """The reference without its write and terminal calls: what the agent reads and says before deciding."""
    out = []
    for turn in copy.deepcopy(turns):
        if isinstance(turn, dict) and isinstance(turn.get("calls"), list):
            turn["calls"] = [c for c in turn["calls"] if not (isinstance(c, dict) and c.get("name") in writes)]
            if not turn["calls"] and not turn.get("content"):
                continue
        out.append(turn)
    return out


def check_stale_truth(ctx: CheckContext) -> CheckResult:
    """On every env, ``generate`` may not change the records after it sets the truth (the gate replays it
    watching: :func:`trace_env.gate_world.truth_order`). Where the env declares ``derive_truth``, the ground truth recomputed from the scenario's own state
    must equal the truth ``generate`` returned, and recomputed from the state the reference's reads leave
    behind (its writes left out) it must still be equal: otherwise the reward grades the agent against a
    truth the agent cannot see, and the right answer loses."""
    c = ctx.config
    rows = ctx.generated(min(c.truth_seeds, len(ctx.seeds)))
    if not rows:
        return CheckResult(name="stale_truth", passed=False, message=NO_SEEDS)
    watched = [r for r in rows if r.world is not None]
    reordered = [(r.seed, r.world.truth_order) for r in watched if r.world.truth_order != "same"]  # type: ignore[union-attr]
    if reordered:
        seed, changed = reordered[0]
        return CheckResult(
            name="stale_truth", passed=False, seeds=len(watched), failing_seeds=[s for s, _ in reordered],
            figure=f"generate changes the records after setting the truth on {len(reordered)}/{len(watched)} seeds",
            message=f"on {len(reordered)}/{len(watched)} seeds generate changes the records after it set the truth (seed {seed}: "
            f"{changed}): the truth was computed from records the agent never sees, so it is stale or the change is "
            "written from it; set the truth last, from the final records",
            counterexample=Counterexample(seed=seed, detail=changed[:300]))
    hidden = [(r.seed, r.world.hidden_threshold) for r in watched if r.world.hidden_threshold not in ("none", "undeclared")]  # type: ignore[union-attr]
    if hidden:
        seed, where = hidden[0]
        return CheckResult(
            name="stale_truth", passed=False, seeds=len(watched), failing_seeds=[s for s, _ in hidden],
            figure=f"a rule the agent is not told decides {len(hidden)}/{len(watched)} seeds",
            message=f"on {len(hidden)}/{len(watched)} seeds derive_truth follows a numeric rule the agent is never told (seed "
            f"{seed}: {where}): state the rule and its number in the system prompt or the records, or drop it",
            counterexample=Counterexample(seed=seed, detail=where[:300]))
    at_start = {r.seed: r.world.truth_at_start for r in rows if r.world is not None}
    if at_start and all(v == "undeclared" for v in at_start.values()):
        return CheckResult(name="stale_truth", passed=True, seeds=len(at_start),
                           figure="derive_truth not declared: the truth is not recomputed (the paraphrase and exploit checks still run)",
                           data={"declared": False})
    for row in rows:
        verdict = at_start.get(row.seed, "same")
        if verdict != "same" and verdict != "undeclared":
            return CheckResult(name="stale_truth", passed=False, seeds=len(at_start), failing_seeds=[row.seed],
                               figure=f"seed {row.seed}: generate's truth is not derive_truth of its own state",
                               message=f"on seed {row.seed} the truth generate returned is not what derive_truth concludes from the "
                               f"scenario's state ({verdict}): compute the truth from the final state you build, after every change",
                               counterexample=Counterexample(seed=row.seed, detail=verdict[:300]), data={"declared": True})
    writes = set(ctx.info.get("write_tools") or []) | set(ctx.info.get("terminal_tools") or [])
    plan = [(r.seed, reads_only(r.reference.turns, writes)) for r in rows]  # type: ignore[union-attr]
    results = ctx.play_many(plan, where="the reference's reads (stale-truth check)", truth_check=True)
    if all(r.truth_check == "undeclared" for r in results):
        return CheckResult(name="stale_truth", passed=True, seeds=len(rows), episodes=len(plan), data={"declared": False},
                           figure="derive_truth not declared: the truth is not recomputed (the paraphrase and exploit checks still run)")
    stale = [(seed, turns, r) for (seed, turns), r in zip(plan, results) if r.truth_check and r.truth_check not in ("same", "undeclared")]
    if stale:
        seed, turns, result = stale[0]
        return CheckResult(
            name="stale_truth", passed=False, seeds=len(rows), episodes=len(plan), failing_seeds=[s for s, _, _ in stale],
            figure=f"the truth goes stale on {len(stale)}/{len(rows)} seeds",
            message=f"on {len(stale)}/{len(rows)} seeds the truth recomputed after the reference's reads differs from the truth the "
            f"reward uses (seed {seed}: {result.truth_check}): something changes the state the truth was computed from (a tool, "
            "the simulated user, or generate after computing it); the agent will see the new state, and the right answer loses",
            counterexample=Counterexample(seed=seed, actions=turns, detail=str(result.truth_check)[:300], reward=result.reward),
            data={"declared": True},
        )
    moved, played = after_writes(ctx, rows)
    if moved is not None:
        seed, turns, result, reference = moved
        return CheckResult(
            name="stale_truth", passed=False, seeds=len(rows), episodes=len(plan) + played, failing_seeds=[seed],
            figure=f"the reward follows a truth the agent's own writes moved (seed {seed})",
            message=f"on seed {seed} the agent's own writes change the truth ({result.truth_check}) and the reward follows the new "
            f"truth: the skipping solution's decision, made after the reads and one more write, earns {result.reward:.3f} against the "
            f"reference's {reference:.3f}, though after the reads alone it earns less; grade against the truth of the scenario as generated (or "
            "recomputed from the records before the agent's writes), never from the state the agent leaves",
            counterexample=Counterexample(seed=seed, actions=turns, detail=str(result.truth_check)[:300], reward=result.reward),
            data={"declared": True})
    return CheckResult(name="stale_truth", passed=True, seeds=len(rows), episodes=len(plan) + played, data={"declared": True},
                       figure=f"the truth recomputed at the start and after the reference's reads equals the graded truth on {len(rows)} "
                       f"seeds; after other writes on what was read, the skipping solution's decision is not paid ({played} episodes)")


AFTER_SALTS = 3  # values drawn per write tool (enums in turn)


def after_writes(ctx: CheckContext, rows: list[Any]) -> tuple[tuple[int, list[Any], Any, float] | None, int]:
    """The truth checked after the agent's own writes: on seeds where the skipping solution is not paid, play the
    reference's reads, one write tool on values the agent read (each tool, a few values), then the skipping
    solution's turns, recomputing the truth at the end. Where the reads and the skipping solution alone are not
    paid, an episode whose extra write moved the truth and that is now paid as the reference (its final state
    another) shows a reward that grades against the state the agent left:
    writes that change the facts (an upgrade) make a forbidden decision (a cancellation) allowed."""
    from factory.validation.checks.exploits import inputs  # the exploit search's view of a seed
    from fuzz.search import seen_arguments

    c = ctx.config
    writes = sorted(ctx.info.get("write_tools") or [])
    decisive = set(writes) | set(ctx.info.get("terminal_tools") or [])
    plan: list[tuple[Any, list[Any]]] = []
    for row in rows:
        reference, skipping = ctx.clipped(row.reference.reward), ctx.clipped(row.skipping.reward)
        if not writes or skipping >= reference - c.exploit_min_drop:
            continue
        made = inputs(ctx, row)
        reads = reads_only(row.reference.turns, decisive)
        reads = [t for t in reads if isinstance(t, dict) and t.get("calls")]
        plan.append((row, reads + copy.deepcopy(row.skipping.turns)))  # the baseline: the same, without the other write
        for name in writes:
            for salt in range(AFTER_SALTS):
                write = {"content": None, "calls": [{"name": name, "arguments": seen_arguments(made, name, salt, widened=False)}]}
                plan.append((row, reads + [write] + copy.deepcopy(row.skipping.turns)))
    if not plan:
        return None, 0
    results = ctx.play_many([(row.seed, turns) for row, turns in plan], templates=True, where="writes before the skipping "
                            "solution (stale-truth check)", truth_check=True, digest_state=True)
    baseline: dict[int, float] = {}
    for (row, _), result in zip(plan, results):
        reference = ctx.clipped(row.reference.reward)
        if row.seed not in baseline:  # the first episode of each seed is its baseline
            baseline[row.seed] = ctx.clipped(result.reward)
            continue
        if (baseline[row.seed] < reference - c.exploit_min_drop and result.truth_check and result.truth_check.startswith("differs") and result.state_digest != row.reference.state_digest
                and ctx.clipped(result.reward) >= reference - c.exploit_min_drop):
            return (row.seed, result.actions or [], result, row.reference.reward), len(plan)
    return None, len(plan)


SMALL_LOSS = 0.25
"""The stated rule: a rewording that costs at most this share of the reward range (a contraction that misses one
keyword of one component among several: "cannot" -> "can't" costing a quarter) is a warning, with its figure; a
larger loss (the answer's whole worth) fails."""


def check_paraphrase(ctx: CheckContext) -> CheckResult:
    """The reference played with its messages reworded (contractions, spellings and number formats, a
    courteous sentence around each) and with runs of reads in another order must keep its reward (within
    ``paraphrase_tolerance`` of the range) on at least ``paraphrase_min_share`` of the plays: a reward that
    matches exact words or a fixed call order makes a sensible answer lose."""
    c = ctx.config
    rows = [r for r in ctx.generated(min(c.paraphrase_seeds, len(ctx.seeds))) if ctx.norm(r.reference.reward) >= c.solvability_min_reward]  # type: ignore[union-attr]
    if not rows:
        return CheckResult(name="paraphrase", passed=True, figure="no solved seed to reword", seeds=0)
    writes = set(ctx.info.get("write_tools") or []) | set(ctx.info.get("terminal_tools") or [])
    plan = [(row, kind, turns) for row in rows for kind, turns in variants(row.reference.turns, writes, ctx.rng)]  # type: ignore[union-attr]
    results = ctx.play_many([(row.seed, turns) for row, _, turns in plan], where="a reworded reference")
    kept: dict[str, list[bool]] = defaultdict(list)
    first_loss = None
    small: list[tuple[float, str, int, float, float]] = []  # (loss, kind, seed, reference, reworded): costs the rule forgives
    for (row, kind, turns), result in zip(plan, results):
        ok = ctx.norm(result.reward) >= ctx.norm(row.reference.reward) - c.paraphrase_tolerance  # type: ignore[union-attr]
        loss = ctx.norm(row.reference.reward) - ctx.norm(result.reward)  # type: ignore[union-attr]
        if not ok and loss <= SMALL_LOSS:  # the stated rule: a small cost is a warning with its figure, not a loss
            small.append((loss, kind, row.seed, row.reference.reward, result.reward))  # type: ignore[union-attr]
            ok = True
        kept[kind].append(ok)
        if not ok and first_loss is None:
            first_loss = (row, kind, turns, result)
    total = sum(len(v) for v in kept.values())
    share = sum(sum(v) for v in kept.values()) / max(1, total)
    figure = f"{share:.0%} of {total} reworded references keep the reward: " + ", ".join(f"{k} {sum(v)}/{len(v)}" for k, v in kept.items())
    data: dict[str, Any] = {}
    if small:
        loss, kind, seed, before, after = max(small)
        figure += (f"; warning: {len(small)} lose a small part (at most {SMALL_LOSS:g} of the range), the largest "
                   f"{kind.replace('_', ' ')} on seed {seed}: {before:.3f} -> {after:.3f}")
        data["warning"] = {"small_losses": len(small), "largest": round(loss, 3), "kind": kind, "seed": seed}
    if share >= c.paraphrase_min_share or first_loss is None:
        return CheckResult(name="paraphrase", passed=True, figure=figure, seeds=len(rows), episodes=len(plan), data=data)
    row, kind, turns, result = first_loss
    return CheckResult(
        name="paraphrase", passed=False, figure=figure, seeds=len(rows), episodes=len(plan),
        message=f"the reference loses its reward when {kind.replace('_', ' ')} change (seed {row.seed}: {result.reward:.3f} against "
        f"{row.reference.reward:.3f}): grade what was decided and said, not the exact words (match whole words and their "  # type: ignore[union-attr]
        "variants, compare numbers as numbers) or the order of reads",
        counterexample=Counterexample(seed=row.seed, actions=turns, reward=result.reward, detail=f"{kind}: reward {result.reward!r}"),
        failing_seeds=sorted({r.seed for (r, k, _), res in zip(plan, results)
                              if ctx.norm(res.reward) < ctx.norm(r.reference.reward) - c.paraphrase_tolerance}),  # type: ignore[union-attr]
    )
