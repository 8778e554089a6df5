"""Does the reward measure the capability? Solvability, necessity (and leaks), reward sensitivity."""

from __future__ import annotations

import math
import random
import re
import statistics
from collections import defaultdict
from typing import Any

from factory.validation.checks import leaks
from factory.validation.checks.context import NO_SEEDS, CheckContext
from factory.validation.stats import looks
from factory.validation.thresholds import MAX_LOOKS, judge_share, passable, settle
from fuzz import free_text
from fuzz.exploits import is_id
from fuzz.policies import as_an_agent, reference_mutants
from schemas.validation import CheckResult, Counterexample, SeedSurvey

_WORD = re.compile(r"<#\d+>|[a-z0-9$%.'-]+")
MASKED = "\x00masked:"  # marks a masked id or name among the phrases
#: Words that state a decision rather than a fact it follows from: a verdict (eligible, denied...) or what the agent
#: is to do about it (a tool result's "agent_should": "refuse", "we recommend...").
VERDICT = re.compile(r"eligible|ineligible|allowed|permitted|approved|denied|deny|qualif\w*|entitled|verdict|decision"
                     r"|refus\w*|reject\w*|recommend\w*")


def _seeds_text(seeds: list[int], limit: int = 12) -> str:
    shown = ", ".join(str(s) for s in seeds[:limit])
    return shown + (f" and {len(seeds) - limit} more" if len(seeds) > limit else "")


def _ok(value: float, test: Any) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value) and bool(test(value))


def check_solvability(ctx: CheckContext) -> CheckResult:
    c = ctx.config
    rows = ctx.survey(min(c.solvability_seeds, len(ctx.seeds)))
    rewards = {r.seed: (r.reference.reward if r.reference else math.nan) for r in rows}
    failing = [s for s, reward in rewards.items() if not _ok(ctx.norm(reward), lambda x: x >= c.solvability_min_reward)]
    solved = judge_share(c, "solvability_min_share", len(rows) - len(failing), len(rows))
    passed = not solved.failed
    finite = [x for x in rewards.values() if math.isfinite(x)]
    first = next((r for r in rows if r.seed in failing), None)
    return settle(CheckResult(
        name="solvability",
        passed=passed,
        figure=f"{len(rows) - len(failing)}/{len(rows)} seeds >= {ctx.low + c.solvability_min_reward * (ctx.high - ctx.low):g} "
        f"({solved.text()}); "
        f"mean reward {statistics.fmean(finite) if finite else math.nan:.3f}",
        message="" if passed else f"the reference solution fails seeds {_seeds_text(failing)}: fix the reference or the reward "
        "on those seeds (an oracle that fails a seed means the seed's task or its grading is broken)",
        counterexample=None if first is None else Counterexample(
            seed=first.seed, actions=first.reference.turns if first.reference else [],
            detail=first.error or f"reward={rewards[first.seed]!r}, ended by {first.reference.ended_by if first.reference else '?'}",
            reward=rewards[first.seed] if math.isfinite(rewards[first.seed]) else None,
        ),
        seeds=len(rows), episodes=len(rows), failing_seeds=failing,
    ), c, [("solvability_min_share", "solved", solved)])


def check_necessity(ctx: CheckContext) -> CheckResult:
    """The capability-skipping agent must fail, also played as an LLM agent plays it; so must an agent that only
    reads the first message."""
    c = ctx.config
    for look in looks(c.necessity_seeds, c.necessity_seeds * 2 ** (MAX_LOOKS - 1)):  # more seeds while it straddles
        rows = ctx.generated(look)
        if not rows:
            return CheckResult(name="capability_necessity", passed=False, message=NO_SEEDS)
        rewards = {r.seed: r.skipping.reward for r in rows}  # type: ignore[union-attr]
        passing = [s for s, reward in rewards.items() if not _ok(ctx.norm(reward), lambda x: x <= c.necessity_max_reward)]
        failed_skipping = judge_share(c, "necessity_min_share", len(rows) - len(passing), len(rows))
        if not failed_skipping.inconclusive:
            break
    problems, counterexample = [], None
    if failed_skipping.failed:
        problems.append(f"the capability-skipping solution still scores > {c.necessity_max_reward} on seeds {_seeds_text(passing)}")
        first = next(r for r in rows if r.seed in passing)
        counterexample = Counterexample(seed=first.seed, actions=first.skipping.turns if first.skipping else [],
                                        detail=f"reward={rewards[first.seed]!r}", reward=rewards[first.seed])
    agent, agent_example, agent_played = _skipping_as_an_agent(ctx, [r for r in rows if r.seed not in passing]) \
        if not problems else (None, None, 0)
    if agent is not None:
        problems.append(agent)
        counterexample = counterexample or agent_example
    leak, leak_example = _leak(ctx, [r for r in rows if r.masked_fingerprint])  # the seeds with masked views
    if leak:
        problems.append(leak)
        counterexample = counterexample or leak_example
    predicted = leaks.find_leak(ctx, rows) if not problems else None  # whatever its wording
    if predicted is not None:
        message, example = leaks.leak_problem(predicted)
        problems.append(message)
        counterexample = counterexample or example
    parrots = [r for r in rows if r.parrot is not None]
    return settle(CheckResult(
        name="capability_necessity",
        passed=not problems,
        figure=f"{len(rows) - len(passing)}/{len(rows)} seeds <= {c.necessity_max_reward} ({failed_skipping.text()}); "
        f"first-message leaks checked on {sum(1 for r in rows if r.masked_fingerprint)} seeds, first-message-only agent on "
        f"{len(parrots)}" + (f", the skipping solution as an agent plays it on {agent_played}" if agent_played else ""),
        message="; ".join(problems),
        counterexample=counterexample,
        seeds=len(rows), episodes=len(rows) + len(parrots) + agent_played, failing_seeds=passing,
    ), c, [("necessity_min_share", "the skipping agent fails", failed_skipping)])


AGENT_SEEDS = 32
"""Seeds on which the skipping solution is also played as an agent plays it (:func:`fuzz.policies.as_an_agent`)."""
AGENT_MAX_PAID = 0.5
"""Share of those seeds past which an env that pays the agent-shaped skipping solution, where it does not pay the
env's own, fails: a systematic leniency (every skipping agent but the env's script), not a borderline figure."""


def _skipping_as_an_agent(ctx: CheckContext, rows: list[SeedSurvey]) -> tuple[str | None, Counterexample | None, int]:
    """The capability-skipping solution replayed as an LLM agent plays it (a question to the user first, text
    beside each call) on seeds where the env's own script of it is not paid: paid there, the reward tells the
    script from an agent, and training's agents are not the script. (problem or None, its example, episodes)."""
    c = ctx.config
    rows = rows[:AGENT_SEEDS]
    plan = [(r.seed, as_an_agent(r.skipping.turns, random.Random(f"as-an-agent:{ctx.run_seed}:{r.seed}")))  # type: ignore[union-attr]
            for r in rows]
    if not plan:
        return None, None, 0
    results = ctx.play_many(plan, where="the capability-skipping solution as an agent plays it")
    paid = [(seed, turns, result.reward) for (seed, turns), result in zip(plan, results)
            if _ok(ctx.norm(result.reward), lambda x: x > c.necessity_max_reward)]
    if len(paid) <= AGENT_MAX_PAID * len(plan):
        return None, None, len(plan)
    seed, turns, reward = paid[0]
    return (f"the capability-skipping solution played as an agent plays it (a question to the user first, text beside "
            f"each call) scores > {c.necessity_max_reward} on {len(paid)}/{len(plan)} seeds where the env's own "
            f"skipping solution does not (seeds {_seeds_text([p[0] for p in paid])}): the reward pays skipping the "
            "capability unless it is done exactly as the env's script does it",
            Counterexample(seed=seed, actions=turns, detail=f"reward={reward!r}", reward=reward), len(plan))


def _leak(ctx: CheckContext, rows: list[SeedSurvey]) -> tuple[str, Counterexample | None]:
    """Does the first observation give the answer away?

    1. An agent that answers with the first user message itself (it reads nothing else) must fail.
    2. Among seeds where the skipping agent acts alike (the request looks the same to an agent without
       the capability), no phrase of the first message (ids and names masked) may predict which state
       changes the reference makes: that decision is what the capability has to find out.
    """
    c = ctx.config
    parrots = [r for r in rows if r.parrot is not None]
    scored = [r.seed for r in parrots if not _ok(ctx.norm(r.parrot.reward), lambda x: x <= c.necessity_max_reward)]  # type: ignore[union-attr]
    if parrots and len(scored) / len(parrots) > 1 - c.necessity_min_share:
        first = next(r for r in parrots if r.seed == scored[0])
        # Is it what the message says, or does the reward pay an agent that says nothing useful at all?
        idle_turn = {"content": ctx.rng.choice(["Okay.", "Alright.", "I see.", "Noted."]), "calls": []}
        idle = ctx.play_many([(s, [idle_turn]) for s in scored], where="an agent that does nothing")
        paid = [s for s, r in zip(scored, idle) if not _ok(ctx.norm(r.reward), lambda x: x <= c.necessity_max_reward)]
        if len(paid) / len(parrots) > 1 - c.necessity_min_share:
            reward = idle[scored.index(paid[0])].reward
            return (
                f"an agent that does nothing (it answers {idle_turn['content']!r}) scores > {c.necessity_max_reward} of the reward "
                f"range on seeds {_seeds_text(paid)}: the reward must require the task to be done",
                Counterexample(seed=paid[0], actions=[idle_turn], detail=f"reward={reward!r}", reward=reward),
            )
        return (
            f"an agent that only repeats the first user message scores > {c.necessity_max_reward} of the reward range on seeds "
            f"{_seeds_text(scored)}: the first message gives the answer away",
            Counterexample(seed=first.seed, actions=[{"content": first.first_message, "calls": []}], detail=f"reward={first.parrot.reward!r}",  # type: ignore[union-attr]
                           reward=first.parrot.reward),  # type: ignore[union-attr]
        )
    decisive = set(ctx.info.get("write_tools") or []) | set(ctx.info.get("terminal_tools") or [])
    groups: dict[tuple[str, ...], list[SeedSurvey]] = defaultdict(list)
    for row in rows:
        groups[tuple(row.skipping.pattern)].append(row)  # type: ignore[union-attr]
    min_class = max(5, math.ceil(0.1 * len(rows)))
    for members in groups.values():
        labels = [tuple(n for turn in m.reference.pattern for n in turn.split("+") if n in decisive) for m in members]  # type: ignore[union-attr]
        # The request may not give the decision away in any words; what the agent hears later (user replies,
        # tool results) carries the facts the capability reads, so there only a stated verdict counts.
        # Ids and names are masked above (they differ per seed); one that recurs across seeds exactly with a
        # decision is a verdict written into a name or id field, wherever the agent reads it.
        phrases = [_phrases(m.masked_observation) | _verdict_phrases(m.heard) | {MASKED + w for w in m.masked_words}
                   for m in members]
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
                    detail = f"first message: {example.first_message[:300]}"
                    if phrase.startswith(MASKED):
                        source, what = "a name or id the agent reads", f"the name or id {phrase[len(MASKED):]!r}"
                        fix = "a name or id must not encode the decision: draw names and ids independently of the truth"
                    elif phrase in _phrases(example.masked_observation):
                        source, what = "the first message", f"the phrase {phrase!r}"
                        fix = "the agent must find this out with its tools, not read it in the request"
                    else:  # heard later: quote it, the first message is not where it is
                        source, what = "a user reply or tool result", f"the phrase {phrase!r}"
                        fix = "user replies and tool results may state facts, never the decision or what the agent is to do"
                        at = max(0, example.heard.lower().find(phrase.split()[0]))
                        detail = f"heard (ids and names masked): ...{example.heard[max(0, at - 150):at + 150]}..."
                    return (
                        f"{source} gives the decision away: on all {len(members)} seeds where the skipping agent acts "
                        f"alike, {what} appears exactly when the reference does {does!r} ({inside} seeds); {fix}",
                        Counterexample(seed=example.seed, actions=example.reference.turns, detail=detail),  # type: ignore[union-attr]
                    )
    return "", None


def _verdict_phrases(text: str) -> set[str]:
    """The phrases (1 to 3 words) of ``text`` that hold a verdict word (eligible, approved, denied...)."""
    words = [w for w in _WORD.findall(text.lower()) if not w.startswith("<#")]
    out = set()
    for i, word in enumerate(words):
        if VERDICT.fullmatch(word.strip(".'-")):
            for n in (1, 2, 3):
                for start in range(max(0, i - n + 1), min(i, len(words) - n) + 1):
                    out.add(" ".join(words[start:start + n]))
    return out


def _phrases(text: str) -> set[str]:
    words = [w for w in _WORD.findall(text.lower()) if not w.startswith("<#")]
    return {" ".join(words[i:i + n]) for n in (1, 2, 3) for i in range(len(words) - n + 1)}


def items(row: SeedSurvey) -> int:
    """How many items the reference handles: the distinct ids in its calls' arguments (forty reservations read, twenty
    of them cancelled: forty items). A per-item reward gives each its share, so one write undone costs one item's
    share, which may be less than one write's."""
    found = set()
    for turn in row.reference.turns:  # type: ignore[union-attr]
        for call in (turn.get("calls") or []) if isinstance(turn, dict) else []:
            arguments = call.get("arguments") if isinstance(call, dict) and isinstance(call.get("arguments"), dict) else {}
            found.update(str(v) for k, v in arguments.items() if is_id(str(k), v))
    return len(found)


def check_reward_sensitivity(ctx: CheckContext) -> CheckResult:
    """Mutants of the reference (a write call dropped, a key argument corrupted, every turn a no-op filler
    call) must score lower: otherwise the reward does not depend on what the capability makes the agent do.
    A drop or corruption undoes one of the reference's writes, so it must cost at least half of one item's share
    (a long task with per-item credit loses one item's worth; items are the writes, or the distinct ids the reference
    handles where they are more), capped at ``sensitivity_min_drop``."""
    c = ctx.config
    writes = set(ctx.info.get("write_tools") or []) | set(ctx.info.get("terminal_tools") or [])
    rows: list[SeedSurvey] = []
    plan: list[tuple[SeedSurvey, str, list[Any]]] = []
    fell: dict[str, dict[int, bool]] = defaultdict(dict)
    kept: dict[tuple[str, int], tuple[list[Any], float]] = {}
    # A sequential test: more seeds while a kind's share of falls still straddles the threshold (see thresholds).
    # 8, 32, 128 by default; 8 seeds cannot pass 0.75 at this error rate (16 can), so the first look is at 16
    for look in passable(c, "sensitivity_min_share", looks(c.sensitivity_seeds, c.sensitivity_seeds * 16, factor=4)):
        seen = {r.seed for r in rows}
        fresh = [r for r in ctx.generated(look) if r.seed not in seen and ctx.norm(r.reference.reward) >= c.sensitivity_min_drop]  # type: ignore[union-attr]
        rows = rows + fresh
        # words of free-text arguments that vary across the seeds' references carry the decision (fuzz.free_text)
        carrying = free_text.argument_texts([r.reference.turns for r in rows], writes)  # type: ignore[union-attr]
        batch: list[tuple[SeedSurvey, str, list[Any]]] = []
        for row in fresh:
            for kind, turns in reference_mutants(row.reference.turns, writes):  # type: ignore[union-attr]
                mutant = free_text.decision_mutant(turns, carrying) if kind == "corrupt" else turns
                if mutant is not None:  # a free-text argument whose words never vary carries no decision to corrupt
                    batch.append((row, kind, mutant))
        plan = plan + batch
        results = ctx.play_many([(row.seed, turns) for row, _, turns in batch], templates=True, where="a mutant of the reference")
        for (row, kind, _), result in zip(batch, results):
            reference = ctx.norm(row.reference.reward)  # type: ignore[union-attr]
            count = sum(1 for turn in row.reference.turns for call in (turn.get("calls") or [])  # type: ignore[union-attr]
                        if isinstance(turn, dict) and isinstance(call, dict) and call.get("name") in writes)
            need = c.sensitivity_min_drop if kind == "filler" else min(c.sensitivity_min_drop, 0.5 / max(1, count, items(row)))
            dropped = _ok(ctx.norm(result.reward), lambda x: x <= reference - need + 1e-9)
            fell[kind][row.seed] = fell[kind].get(row.seed, False) or dropped
            if not dropped:
                kept.setdefault((kind, row.seed), (result.actions or [], result.reward))
        if not any(judge_share(c, "sensitivity_min_share", sum(v.values()), len(v)).inconclusive for v in fell.values()):
            break
    problems, counterexample, parts, decided = [], None, [], []
    describe = {"filler": "every turn replaced by a no-op call", "drop": "a write call dropped", "corrupt": "a key argument corrupted"}
    by_seed = {row.seed: row for row in rows}
    for kind in ("filler", "drop", "corrupt"):
        per_seed = fell.get(kind, {})
        if not per_seed:
            continue
        n = sum(per_seed.values())
        fell_share = judge_share(c, "sensitivity_min_share", n, len(per_seed))
        decided.append(("sensitivity_min_share", f"{kind} mutants fall", fell_share))
        parts.append(f"{kind} {n}/{len(per_seed)} [{fell_share.low:.2f}, {fell_share.high:.2f}]")
        if fell_share.failed:
            seed = next(s for s, did in per_seed.items() if not did)  # a seed on which no mutant of this kind fell
            actions, reward = kept[(kind, seed)]
            reference = by_seed[seed].reference.reward  # type: ignore[union-attr]
            problems.append(f"with {describe[kind]} the reward does not fall on {len(per_seed) - n}/{len(per_seed)} seeds "
                            f"(seed {seed}: {reward:.3f} vs reference {reference:.3f})")
            counterexample = counterexample or Counterexample(seed=seed, actions=actions, reward=reward,
                                                              detail=f"{kind}: reward {reward!r} vs reference {reference!r}")
    if not rows:
        problems.append("no seed has a reference reward to fall from")
    return settle(CheckResult(
        name="reward_sensitivity",
        passed=not problems,
        figure=f"mutants whose reward fell, per seed (share interval; need at least {c.sensitivity_min_share:.2f}): "
        f"{', '.join(parts) or 'none'}",
        message="; ".join(problems) + ("; the reward must depend on the state changes and answers the capability produces" if problems else ""),
        counterexample=counterexample,
        seeds=len(rows), episodes=len(plan),
    ), c, decided)
