"""Does the reward measure the capability? Solvability, necessity (and leaks), reward sensitivity."""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from typing import Any

from factory.validation.checks.context import NO_SEEDS, CheckContext
from fuzz.policies import reference_mutants
from schemas.validation import CheckResult, Counterexample, SeedSurvey

_WORD = re.compile(r"<#\d+>|[a-z0-9$%.'-]+")


def _seeds_text(seeds: list[int], limit: int = 12) -> str:
    shown = ", ".join(str(s) for s in seeds[:limit])
    return shown + (f" and {len(seeds) - limit} more" if len(seeds) > limit else "")


def _ok(value: float, test: Any) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value) and bool(test(value))


def check_solvability(ctx: CheckContext) -> CheckResult:
    c = ctx.config
    rows = ctx.survey(min(c.solvability_seeds, len(ctx.seeds)))
    rewards = {r.seed: (r.reference.reward if r.reference else math.nan) for r in rows}
    failing = [s for s, reward in rewards.items() if not _ok(reward, lambda x: x >= c.solvability_min_reward)]
    share = 1 - len(failing) / len(rows)
    passed = share >= c.solvability_min_share
    finite = [x for x in rewards.values() if math.isfinite(x)]
    first = next((r for r in rows if r.seed in failing), None)
    return CheckResult(
        name="solvability",
        passed=passed,
        figure=f"{len(rows) - len(failing)}/{len(rows)} seeds >= {c.solvability_min_reward} (need {c.solvability_min_share:.0%}); "
        f"mean reward {statistics.fmean(finite) if finite else math.nan:.3f}",
        message="" if passed else f"the reference solution fails seeds {_seeds_text(failing)}: fix the reference or the reward "
        "on those seeds (an oracle that fails a seed means the seed's task or its grading is broken)",
        counterexample=None if first is None else Counterexample(
            seed=first.seed, actions=first.reference.turns if first.reference else [],
            detail=first.error or f"reward={rewards[first.seed]!r}, ended by {first.reference.ended_by if first.reference else '?'}",
        ),
        seeds=len(rows), episodes=len(rows), failing_seeds=failing,
    )


def check_necessity(ctx: CheckContext) -> CheckResult:
    """The capability-skipping agent must fail; so must an agent that only reads the first message."""
    c = ctx.config
    rows = ctx.generated(min(c.necessity_seeds, len(ctx.seeds)))
    if not rows:
        return CheckResult(name="capability_necessity", passed=False, message=NO_SEEDS)
    rewards = {r.seed: r.skipping.reward for r in rows}  # type: ignore[union-attr]
    passing = [s for s, reward in rewards.items() if not _ok(reward, lambda x: x <= c.necessity_max_reward)]
    share = 1 - len(passing) / len(rows)
    problems, counterexample = [], None
    if share < c.necessity_min_share:
        problems.append(f"the capability-skipping solution still scores > {c.necessity_max_reward} on seeds {_seeds_text(passing)}")
        first = next(r for r in rows if r.seed in passing)
        counterexample = Counterexample(seed=first.seed, actions=first.skipping.turns if first.skipping else [],
                                        detail=f"reward={rewards[first.seed]!r}")
    leak, leak_example = _leak(ctx, [r for r in rows if r.masked_fingerprint])  # the seeds with masked views
    if leak:
        problems.append(leak)
        counterexample = counterexample or leak_example
    parrots = [r for r in rows if r.parrot is not None]
    return CheckResult(
        name="capability_necessity",
        passed=not problems,
        figure=f"{len(rows) - len(passing)}/{len(rows)} seeds <= {c.necessity_max_reward} (need {c.necessity_min_share:.0%}); "
        f"first-message leaks checked on {sum(1 for r in rows if r.masked_fingerprint)} seeds, first-message-only agent on "
        f"{len(parrots)}",
        message="; ".join(problems),
        counterexample=counterexample,
        seeds=len(rows), episodes=len(rows) + len(parrots), failing_seeds=passing,
    )


def _leak(ctx: CheckContext, rows: list[SeedSurvey]) -> tuple[str, Counterexample | None]:
    """Does the first observation give the answer away?

    1. An agent that answers with the first user message itself (it reads nothing else) must fail.
    2. Among seeds where the skipping agent acts alike (the request looks the same to an agent without
       the capability), no phrase of the first message (ids and names masked) may predict which state
       changes the reference makes: that decision is what the capability has to find out.
    """
    c = ctx.config
    parrots = [r for r in rows if r.parrot is not None]
    scored = [r.seed for r in parrots if not _ok(r.parrot.reward, lambda x: x <= c.necessity_max_reward)]  # type: ignore[union-attr]
    if parrots and len(scored) / len(parrots) > 1 - c.necessity_min_share:
        first = next(r for r in parrots if r.seed == scored[0])
        # Is it what the message says, or does the reward pay an agent that says nothing useful at all?
        idle = ctx.play_many([(s, [{"content": "Okay.", "calls": []}]) for s in scored], where="an agent that does nothing")
        paid = [s for s, r in zip(scored, idle) if not _ok(r.reward, lambda x: x <= c.necessity_max_reward)]
        if len(paid) / len(parrots) > 1 - c.necessity_min_share:
            return (
                f"an agent that does nothing (it answers 'Okay.') scores > {c.necessity_max_reward} on seeds {_seeds_text(paid)}: "
                "the reward must require the task to be done",
                Counterexample(seed=paid[0], actions=[{"content": "Okay.", "calls": []}], detail=f"reward={idle[scored.index(paid[0])].reward!r}"),
            )
        return (
            f"an agent that only repeats the first user message scores > {c.necessity_max_reward} on seeds "
            f"{_seeds_text(scored)}: the first message gives the answer away",
            Counterexample(seed=first.seed, actions=[{"content": first.first_message, "calls": []}], detail=f"reward={first.parrot.reward!r}"),  # type: ignore[union-attr]
        )
    decisive = set(ctx.info.get("write_tools") or []) | set(ctx.info.get("terminal_tools") or [])
    groups: dict[tuple[str, ...], list[SeedSurvey]] = defaultdict(list)
    for row in rows:
        groups[tuple(row.skipping.pattern)].append(row)  # type: ignore[union-attr]
    min_class = max(5, math.ceil(0.1 * len(rows)))
    for members in groups.values():
        labels = [tuple(n for turn in m.reference.pattern for n in turn.split("+") if n in decisive) for m in members]  # type: ignore[union-attr]
        phrases = [_phrases(m.masked_observation) for m in members]
        for label in set(labels):
            inside = sum(1 for x in labels if x == label)
            if inside < min_class or len(members) - inside < min_class:
                continue
            counts: dict[str, int] = defaultdict(int)
            for found in phrases:
                for phrase in found:
                    counts[phrase] += 1
            for phrase, n in sorted(counts.items(), key=lambda item: (item[0].count(" "), item[0])):
                if n < min_class or len(members) - n < min_class:
                    continue
                if all((phrase in found) == (x == label) for found, x in zip(phrases, labels)):
                    example = next(m for m, found in zip(members, phrases) if phrase in found)
                    does = " then ".join(label) or "no state change"
                    return (
                        f"the first message gives the decision away: on all {len(members)} seeds where the skipping agent acts "
                        f"alike, the phrase {phrase!r} appears exactly when the reference does {does!r} ({inside} seeds); "
                        "the agent must find this out with its tools, not read it in the request",
                        Counterexample(seed=example.seed, actions=example.reference.turns,  # type: ignore[union-attr]
                                       detail=f"first message: {example.first_message[:300]}"),
                    )
    return "", None


def _phrases(text: str) -> set[str]:
    words = [w for w in _WORD.findall(text.lower()) if not w.startswith("<#")]
    return {" ".join(words[i:i + n]) for n in (1, 2, 3) for i in range(len(words) - n + 1)}


def check_reward_sensitivity(ctx: CheckContext) -> CheckResult:
    """Mutants of the reference (a write call dropped, a key argument corrupted, every turn a no-op filler
    call) must score lower: otherwise the reward does not depend on what the capability makes the agent do."""
    c = ctx.config
    rows = [r for r in ctx.generated(min(c.sensitivity_seeds, len(ctx.seeds))) if r.reference.reward >= c.sensitivity_min_drop]  # type: ignore[union-attr]
    writes = set(ctx.info.get("write_tools") or []) | set(ctx.info.get("terminal_tools") or [])
    plan: list[tuple[SeedSurvey, str, list[Any]]] = []
    for row in rows:
        plan.extend((row, kind, turns) for kind, turns in reference_mutants(row.reference.turns, writes))  # type: ignore[union-attr]
    results = ctx.play_many([(row.seed, turns) for row, _, turns in plan], templates=True, where="a mutant of the reference")
    fell: dict[str, dict[int, bool]] = defaultdict(dict)
    worst: dict[str, tuple[int, list[Any], float, float]] = {}
    for (row, kind, _), result in zip(plan, results):
        reference = row.reference.reward  # type: ignore[union-attr]
        dropped = _ok(result.reward, lambda x: x <= reference - c.sensitivity_min_drop)
        fell[kind][row.seed] = fell[kind].get(row.seed, False) or dropped
        if not dropped and kind not in worst:
            worst[kind] = (row.seed, result.actions or [], reference, result.reward)
    problems, counterexample, parts = [], None, []
    describe = {"filler": "every turn replaced by a no-op call", "drop": "a write call dropped", "corrupt": "a key argument corrupted"}
    for kind in ("filler", "drop", "corrupt"):
        per_seed = fell.get(kind, {})
        if not per_seed:
            continue
        n = sum(per_seed.values())
        parts.append(f"{kind} {n}/{len(per_seed)}")
        if n / len(per_seed) < c.sensitivity_min_share:
            seed, actions, reference, reward = worst[kind]
            problems.append(f"with {describe[kind]} the reward falls by < {c.sensitivity_min_drop} on "
                            f"{len(per_seed) - n}/{len(per_seed)} seeds (seed {seed}: {reward:.3f} vs reference {reference:.3f})")
            counterexample = counterexample or Counterexample(seed=seed, actions=actions, detail=f"{kind}: reward {reward!r} vs reference {reference!r}")
    if not rows:
        problems.append("no seed has a reference reward to fall from")
    return CheckResult(
        name="reward_sensitivity",
        passed=not problems,
        figure=f"mutants whose reward fell, per seed: {', '.join(parts) or 'none'}",
        message="; ".join(problems) + ("; the reward must depend on the state changes and answers the capability produces" if problems else ""),
        counterexample=counterexample,
        seeds=len(rows), episodes=len(plan),
    )
