"""The exploit search that optimizes: hill-climbing over policies composed from primitives (:mod:`fuzz.search`)
for the most reward earned WITHOUT taking the reference's decision, on a fixed small budget of episodes.

The library (:mod:`fuzz.exploits`) plays the holes someone named; a learner composes moves until the reward pays
(every id it read in a list argument, text beside a tool call, a long polite paragraph that decides nothing).
The search does the same on a handful of seeds the reference solves: it starts from every primitive alone and a
few shapes a learner tries first, keeps the best few, and tries small changes to them (insert, drop, replace,
swap a primitive, change its variant) for a fixed number of rounds. An episode that ends in the reference's final
state (where the reference writes) or says the reference's answer (where it only answers) took the reference's
decision: it scores nothing, however it got there; so does a near miss of it (the reference's writes with only a number
changed) that lost reward, as the library judges its number mutations. The best policies found are then played on further seeds and
judged as the library's policies are (mean share of the reference's reward, and matches per decision class);
the best one is reported as a replayable counterexample (its seed, its resolved actions, the primitives).

Deterministic given the run seed: the moves come from ``random.Random("trace-gate-search:<run_seed>")`` and
the episodes are played in the order asked.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from factory.validation.checks.context import CheckContext
from fuzz.exploits import ExploitInput
from fuzz.search import Policy, describe, mutate, reference_stance, render, seeds_of_search, stance, texts_of
from fuzz.turns import calls_of, decision_class
from schemas.validation import SeedSurvey

SEARCH_SEEDS = 4  # seeds the search climbs on
ROUNDS = 5  # rounds of moves after the first population
PARENTS = 3  # best policies kept each round
CHILDREN = 12  # moves tried per round (spread over the parents)
CONFIRM = 2  # best policies played on the further seeds
CONFIRM_SEEDS = 16  # further seeds they are played on
GOOD_ENOUGH = 0.95  # a policy this close to the reference on every search seed ends the climb early
CLASS_MIN, CLASS_MATCH = 4, 0.8  # as the library's: matched on this share of one decision class (>= CLASS_MIN seeds)


@dataclass
class Played:
    """One policy's episodes: per seed (reference share, reward share, same decision as the reference, actions, raw)."""

    policy: Policy
    seeds: dict[int, tuple[float, float, bool, list[Any], float]] = field(default_factory=dict)

    def fitness(self) -> float:
        """Mean share of the reference's reward, an episode that took the reference's decision counting 0."""
        values = [0.0 if same else min(1.0, mine / ref) if ref > 0 else 0.0 for ref, mine, same, _, _ in self.seeds.values()]
        return statistics.fmean(values) if values else 0.0

    def other(self) -> dict[int, tuple[float, float, bool, list[Any], float]]:
        return {s: v for s, v in self.seeds.items() if not v[2]}

    def mean_share(self) -> float:
        """As the library's policies: mean reward over the seeds where it did not take the reference's decision,
        as a share of the reference's mean there."""
        values = list(self.other().values())
        reference = statistics.fmean(v[0] for v in values) if values else 0.0
        return statistics.fmean(v[1] for v in values) / reference if values and reference > 0 else 0.0

    def matched(self, min_drop: float) -> set[int]:
        return {s for s, (ref, mine, same, _, _) in self.seeds.items() if not same and ref > 0 and mine >= ref - min_drop}


@dataclass
class SearchOutcome:
    best: Played | None
    episodes: int
    seconds: float
    policies: int
    failing: bool = False
    reason: str = ""
    worst_class: tuple[str, int, int] | None = None
    data: dict[str, Any] = field(default_factory=dict)


def _same_decision(row: SeedSurvey, actions: list[Any], digest: str, wrote: bool) -> bool:
    """The reference's decision: its final state where it writes (however the episode got there), else its answer
    (a hedge that says both yes and no included: whether a reward may pay a hedge is not this search's verdict)."""
    if digest != row.reference.state_digest:  # type: ignore[union-attr]
        return False
    said = stance(texts_of(actions))  # a hedge (yes and no) says the reference's answer too: not counted against the env
    return wrote or said == reference_stance(row.reference.turns) or said == "both"  # type: ignore[union-attr]


def _numbers_out(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, dict, list)):
        return value
    if isinstance(value, dict):
        return {k: _numbers_out(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers_out(v) for v in value]
    return "#"


def _within(part: list[Any], whole: list[Any]) -> bool:
    """``part`` is a subsequence of ``whole``."""
    rest = iter(whole)
    return all(any(item == other for other in rest) for item in part)


def near_miss(actions: list[Any], reference: list[Any], writes: frozenset[str]) -> bool:
    """The reference's writes made with only numbers changed (an alarm a minute off, an amount a tenth more), whatever
    else was tried around them: a near miss of its decision, judged as the library's number mutations are (it must
    lose reward, by any amount), not as a policy that ignores the task (partial credit for a near miss is the
    author's to give; a near miss paid in full still counts against the env)."""
    def made(turns: list[Any]) -> list[Any]:
        return [[c.get("name"), c.get("arguments")] for t in turns for c in calls_of(t) if c.get("name") in writes]

    mine, theirs = made(actions), made(reference)
    shaped = [[name, _numbers_out(arguments)] for name, arguments in mine]
    return bool(theirs) and _within([[n, _numbers_out(a)] for n, a in theirs], shaped) and not _within(theirs, mine)


def play_policies(ctx: CheckContext, policies: list[Policy], rows: list[SeedSurvey], made: dict[int, ExploitInput],
                  table: dict[Policy, Played]) -> int:
    """Every policy on every row (those already played skipped); returns the episodes played."""
    writes = frozenset(ctx.info.get("write_tools") or []) | frozenset(ctx.info.get("terminal_tools") or [])
    max_turns = int(ctx.info.get("max_steps") or 30)
    plan = [(p, row) for p in policies for row in rows if row.seed not in table.setdefault(p, Played(p)).seeds]
    results = ctx.play_many([(row.seed, render(p, made[row.seed], max_turns)) for p, row in plan], templates=True,
                            where="a searched policy", digest_state=True)
    for (policy, row), result in zip(plan, results):
        wrote = any(c.get("name") in writes for t in row.reference.turns for c in calls_of(t))  # type: ignore[union-attr]
        actions = result.actions or []
        reference, mine = ctx.clipped(row.reference.reward), ctx.clipped(result.reward)  # type: ignore[union-attr]
        same = _same_decision(row, actions, result.state_digest, wrote) or (
            near_miss(actions, row.reference.turns, writes) and mine < reference - ctx.config.exploit_min_drop)  # type: ignore[union-attr]
        table[policy].seeds[row.seed] = (reference, mine, same, actions, result.reward)
    return len(plan)


def search(ctx: CheckContext, rows: list[SeedSurvey], make: Callable[[SeedSurvey], ExploitInput]) -> SearchOutcome:
    """Climb on the first ``SEARCH_SEEDS`` rows, confirm the best on the next ``CONFIRM_SEEDS``, judge."""
    started = time.perf_counter()
    climb, further = rows[:SEARCH_SEEDS], rows[SEARCH_SEEDS: SEARCH_SEEDS + CONFIRM_SEEDS]
    if not climb:
        return SearchOutcome(None, 0, 0.0, 0)
    made = {row.seed: make(row) for row in climb + further}
    rng = random.Random(f"trace-gate-search:{ctx.run_seed}")
    table: dict[Policy, Played] = {}
    episodes = play_policies(ctx, seeds_of_search(), climb, made, table)
    for _ in range(ROUNDS):
        ranked = sorted(table.values(), key=lambda p: (-p.fitness(), len(p.policy), describe(p.policy)))
        if ranked[0].fitness() >= GOOD_ENOUGH:
            break
        parents = [p.policy for p in ranked[:PARENTS]]
        children: list[Policy] = []
        for k in range(CHILDREN * 3):
            child = mutate(parents[k % len(parents)], rng)
            if child not in table and child not in children and child:
                children.append(child)
            if len(children) >= CHILDREN:
                break
        episodes += play_policies(ctx, children, climb, made, table)
    ranked = sorted(table.values(), key=lambda p: (-p.fitness(), len(p.policy), describe(p.policy)))
    best = [p for p in ranked[:CONFIRM] if p.fitness() > 0]
    if further and best:
        episodes += play_policies(ctx, [p.policy for p in best], further, made, table)
    classes = {row.seed: decision_class(row.reference.turns, frozenset(ctx.info.get("write_tools") or []),  # type: ignore[union-attr]
                                        frozenset(ctx.info.get("terminal_tools") or [])) for row in climb + further}
    c = ctx.config
    outcome = SearchOutcome(ranked[0] if ranked else None, episodes, time.perf_counter() - started, len(table))
    for played in best:
        matched = played.matched(c.exploit_min_drop)
        per_class: dict[str, tuple[int, int]] = {}
        for seed in played.other():
            kept, n = per_class.get(classes[seed], (0, 0))
            per_class[classes[seed]] = (kept + (seed in matched), n + 1)
        worst = max(((k, n, name) for name, (k, n) in per_class.items() if len(per_class) >= 2 or len(classes) > n),
                    key=lambda t: (t[0] / t[1], t[1]), default=None)
        share = played.mean_share()
        if share > c.exploit_max_share:
            outcome.best, outcome.failing = played, True
            outcome.reason = f"reaches {share:.0%} of the reference's mean reward (at most {c.exploit_max_share:.0%} allowed)"
            break
        if worst is not None and worst[1] >= CLASS_MIN and worst[0] / worst[1] >= CLASS_MATCH:
            outcome.best, outcome.failing, outcome.worst_class = played, True, (worst[2], worst[0], worst[1])
            outcome.reason = (f"matches the reference's reward on {worst[0]}/{worst[1]} seeds of one decision class (the "
                              f"reference's '{worst[2]}'; at most {CLASS_MATCH:.0%} allowed)")
            break
    top = outcome.best
    outcome.data = {"policies": len(table), "episodes": episodes, "seconds": round(outcome.seconds, 3),
                    **({"best": describe(top.policy), "best_genes": [g.to_json() for g in top.policy],
                        "best_fitness": round(top.fitness(), 3), "best_mean_share": round(top.mean_share(), 3),
                        "best_seeds": len(top.seeds)} if top else {})}
    return outcome


def worst_seed(played: Played, min_drop: float) -> int:
    """The seed to show: a matched one where it earned most over the reference, else its best."""
    pool = sorted(played.matched(min_drop)) or sorted(played.other()) or sorted(played.seeds)
    return max(pool, key=lambda s: played.seeds[s][1] - played.seeds[s][0])
