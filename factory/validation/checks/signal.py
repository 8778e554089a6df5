"""Can GRPO learn from the reward, and does the reward stay in its declared range wherever a policy can take the env?"""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

from hypothesis import strategies as st

from factory.validation.checks.context import NO_SEEDS, CheckContext
from factory.validation.checks.fuzzing import search
from factory.validation.stats import looks
from factory.validation.thresholds import MAX_LOOKS, judge_ratio, judge_share, settle
from fuzz.policies import filler_turn, mixture_rollout
from fuzz.strategies import realistic_sequences
from schemas.validation import CheckResult, Counterexample, EpisodeSummary

LENGTH_CONTROLS = 6  # groups whose spread is compared with filler episodes of the same lengths


def check_grpo_signal(ctx: CheckContext) -> CheckResult:
    """K rollouts per seed from a realistic mixture (reference, skipping, out-of-order and wrong-value
    calls, fillers). A group is informative when its rewards spread (std >= ``grpo_min_spread``) and the
    spread is not explained by episode length alone (filler episodes of the same lengths score the same).
    The mixture must not already succeed most of the time: a saturated reward leaves nothing to learn.
    Rewards are judged on the env's declared range, as shares of it, and an out-of-range reward is clipped
    to the range (what a trainer makes of it), never dropped."""
    c = ctx.config
    rows: list[Any] = []
    results: list[EpisodeSummary] = []
    controls: list[tuple[EpisodeSummary, EpisodeSummary]] = []  # (shortest, longest) rollout of the first groups
    filler: list[EpisodeSummary] = []
    # A sequential test: twice the seeds while a figure's interval straddles its threshold (see thresholds).
    for look in looks(c.grpo_seeds, c.grpo_seeds * 2 ** (MAX_LOOKS - 1)):
        fresh = ctx.generated(look)[len(rows):]
        if not rows and not fresh:
            return CheckResult(name="grpo_signal", passed=False, message=NO_SEEDS)
        plan = [(row.seed, mixture_rollout(row.reference.turns, row.skipping.turns, random.Random(row.seed * 1000 + k)))  # type: ignore[union-attr]
                for row in fresh for k in range(c.grpo_group_size)]
        results += ctx.play_many(plan, templates=True, where="a GRPO mixture rollout")
        first, rows = not rows, rows + fresh
        groups = [results[i:i + c.grpo_group_size] for i in range(0, len(results), c.grpo_group_size)]
        if first:  # replayed as filler of the same lengths
            controls = [(min(group, key=lambda r: r.steps), max(group, key=lambda r: r.steps)) for group in groups[:LENGTH_CONTROLS]]
            filler = ctx.play_many([(row.seed, [filler_turn(ctx.rng)] * max(1, r.steps)) for row, pair in zip(rows, controls) for r in pair],
                                   where="a filler episode (length control)")
        informative, flat_seed, by_length, spreads = 0, None, 0, []
        for index, (row, group) in enumerate(zip(rows, groups)):
            # Out-of-bounds rewards are reward_bounds' finding: judge the signal on what a trainer would clip to.
            rewards = [ctx.clipped(r.reward) for r in group]
            spread = statistics.pstdev(rewards) if len(rewards) > 1 else 0.0
            spreads.append(spread)
            explained = index < len(controls) and (
                controls[index][0].reward != controls[index][1].reward
                and filler[2 * index].reward == controls[index][0].reward and filler[2 * index + 1].reward == controls[index][1].reward
            )
            by_length += explained
            if spread >= c.grpo_min_spread and not explained:
                informative += 1
            elif flat_seed is None:
                flat_seed = row.seed
        share = judge_share(c, "grpo_min_informative_share", informative, len(groups))
        per_seed = [sum(ctx.clipped(r.reward) >= c.solvability_min_reward for r in group) / len(group) for group in groups if group]
        saturated = judge_ratio(c, "grpo_max_success_share", per_seed, [1.0] * len(per_seed))
        if not (share.inconclusive or saturated.inconclusive) or not fresh:
            break
    everything = [ctx.clipped(r.reward) for r in results]
    success = sum(r >= c.solvability_min_reward for r in everything) / max(1, len(everything))
    problems = []
    if share.failed:
        problems.append(f"only {informative}/{len(groups)} groups have a reward spread >= {c.grpo_min_spread} that is not just "
                        "episode length: make the reward graded (partial credit per sub-goal) and about what the agent did")
    if controls and by_length > len(controls) // 2:
        problems.append(f"in {by_length}/{len(controls)} groups filler episodes of the same lengths score the same: the reward "
                        "follows episode length, not behaviour")
    if saturated.failed:
        problems.append(f"{success:.0%} of mixture rollouts already reach {c.solvability_min_reward:.0%} of the reward range (at most "
                        f"{c.grpo_max_success_share:.0%}): the reward is saturated, GRPO has little to learn")
    return settle(CheckResult(
        name="grpo_signal",
        passed=not problems,
        figure=f"{informative}/{len(groups)} informative groups (K={c.grpo_group_size}, std >= {c.grpo_min_spread}; {share.text()}); "
        f"mean std {statistics.fmean(spreads) if spreads else 0:.3f}; {success:.0%} of rollouts succeed ({saturated.text()})",
        message="; ".join(problems),
        counterexample=None if not problems else Counterexample(
            seed=flat_seed if flat_seed is not None else (rows[0].seed if rows else None),
            detail="rewards of the group: " + ", ".join(f"{r.reward:.3f}" for r in (groups[0] if groups else [])),
        ),
        seeds=len(rows), episodes=len(results) + len(filler),
    ), c, [("grpo_min_informative_share", "informative groups", share), ("grpo_max_success_share", "rollouts that succeed", saturated)])


def check_reward_bounds(ctx: CheckContext) -> CheckResult:
    """Every reward the gate observed anywhere, plus realistic fuzzing (real ids and values, repeated
    calls, call-only turns that keep the episode going), must be finite and in the declared range."""
    before = ctx.episodes_run
    good = [r.seed for r in ctx.generated(min(16, len(ctx.seeds)))]
    if not good:
        return CheckResult(name="reward_bounds", passed=False, message=NO_SEEDS)
    seeds = st.sampled_from(good)
    strategy = st.tuples(seeds, realistic_sequences(ctx.info["tools"]))

    bad = search(ctx, strategy, lambda cases: ctx.play_many(cases, templates=True, where="realistic fuzzing"),
                 lambda result: ctx.reward_is_bad(result.reward))
    fuzzed = ctx.episodes_run - before
    low, high = ctx.reward_range()
    figure = f"{ctx.episodes_run} episodes observed ({fuzzed} realistic fuzz), rewards in [{low:.3f}, {high:.3f}]"
    if bad is not None:
        replay: EpisodeSummary = ctx.play(bad[0], bad[1], templates=True, where="realistic fuzzing")
        return CheckResult(
            name="reward_bounds", passed=False, figure=figure, seeds=16, episodes=fuzzed,
            message=f"reward {replay.reward!r} is outside the declared range [{ctx.low:g}, {ctx.high:g}] or not finite",
            counterexample=Counterexample(seed=bad[0], actions=replay.actions or bad[1], detail=f"reward={replay.reward!r}",
                                          reward=replay.reward if math.isfinite(replay.reward) else None),
        )
    if ctx.bad_reward is not None:
        found = ctx.bad_reward
        return CheckResult(
            name="reward_bounds", passed=False, figure=figure, seeds=16, episodes=fuzzed,
            message=f"{found.where} got {found.detail}: rewards must be finite and in the declared range [{ctx.low:g}, {ctx.high:g}] "
            "(an env whose reward is not in [0, 1] declares reward_range)",
            counterexample=Counterexample(seed=found.seed, actions=found.actions, detail=found.detail),
        )
    return CheckResult(name="reward_bounds", passed=True, figure=figure, seeds=16, episodes=fuzzed)
