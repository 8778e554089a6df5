"""Will the env survive training? Robustness (crashes, endings, stress, leaks, memory) and time budget."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from factory.validation.checks.context import NO_SEEDS, CheckContext
from fuzz.strategies import turn as garbage_turn
from schemas.validation import CheckResult, Counterexample, MemoryProbe

MEMORY_EPISODES = 6  # x2: the first half warms caches up, the second is measured


def check_robustness(ctx: CheckContext) -> CheckResult:
    """Malformed input never crashes env code; reference episodes end because the task ended (not by
    truncation); a ``max_steps`` stress episode ends in time; nothing leaks from one episode into the next;
    memory stays within budget now and projected over a training run."""
    c = ctx.config
    max_steps = int(ctx.info["max_steps"])
    base = dict(name="robustness", passed=False)
    if max_steps > c.max_steps_limit:
        return CheckResult(**base, figure=f"max_steps={max_steps}",
                           message=f"max_steps {max_steps} exceeds the limit {c.max_steps_limit}: episodes must end")
    before = ctx.episodes_run
    rows = ctx.generated(len(ctx.seeds))
    if rows:
        fuzz_seeds = st.sampled_from([r.seed for r in rows[:16]])
        garbage = st.tuples(fuzz_seeds, st.lists(garbage_turn(ctx.info["tools"]), min_size=1, max_size=6))
        bad = ctx.find(garbage, lambda case: bool(ctx.play(case[0], case[1], where="malformed input").env_errors))
        if bad is not None:
            errors = ctx.play(bad[0], bad[1], where="malformed input").env_errors
            first = errors[0] if errors else {"where": "?", "error": "?"}
            return CheckResult(**base, figure=f"env error: {first.get('where')}", episodes=ctx.episodes_run - before,
                               message=f"malformed input crashed the env in {first.get('where')}: {first.get('error')}",
                               counterexample=Counterexample(seed=bad[0], actions=bad[1], detail=str(first.get("error"))))
        problem = _stress(ctx, rows, max_steps) or _leaks(ctx, rows)
        memory_figure, memory_problem = _memory(ctx, rows[0])
        problem = problem or memory_problem
    else:
        problem, memory_figure = (NO_SEEDS, Counterexample()), ""
    if ctx.env_error is not None:  # from any episode of any check, this one's included
        found = ctx.env_error
        problem = (f"env code raised during {found.where}: {found.detail}",
                   Counterexample(seed=found.seed, actions=found.actions, detail=found.detail))
    unended = [r for r in rows if not r.reference.terminated]  # type: ignore[union-attr]
    if unended and ctx.env_error is None:
        first_row = unended[0]
        how = first_row.reference.ended_by  # type: ignore[union-attr]
        problem = (f"the reference episode of seed {first_row.seed} ended by {how!r}, not because the task was over "
                   f"({len(unended)}/{len(rows)} seeds): the simulated user must close the conversation (UserReply(done=True)) "
                   "or a terminal tool must end it",
                   Counterexample(seed=first_row.seed, actions=first_row.reference.turns, detail=f"ended_by={how}"))  # type: ignore[union-attr]
    figure = (f"{len(rows) - len(unended)}/{len(rows)} reference episodes end by termination; {max_steps}-turn stress "
              f"episode; {memory_figure}")
    return CheckResult(
        name="robustness", passed=problem is None, figure=figure,
        message="" if problem is None else problem[0], counterexample=None if problem is None else problem[1],
        seeds=len(rows), episodes=ctx.episodes_run - before, failing_seeds=[r.seed for r in unended],
    )


def _memory(ctx: CheckContext, row: Any) -> tuple[str, tuple[str, Counterexample] | None]:
    """Worker memory before and after many episodes, and the growth every episode leaves behind, projected
    over ``memory_projection_episodes``; a transcript that changes over the repeats is a leak."""
    c = ctx.config
    memory = MemoryProbe.model_validate(ctx.call(
        "memory", {"seed": row.seed, "turns": row.reference.turns, "episodes": MEMORY_EPISODES},
        c.rpc_timeout_s * 2, seed=row.seed,
    ))
    ctx.episodes_run += memory.episodes
    projected = memory.rss_after_mb + memory.growth_bytes_per_episode * c.memory_projection_episodes / 2**20
    figure = (f"memory {memory.rss_before_mb:.0f} -> {memory.rss_after_mb:.0f} MB over {memory.episodes} episodes, "
              f"+{memory.growth_bytes_per_episode / 1024:.1f} KB kept per episode")
    example = Counterexample(seed=row.seed, actions=row.reference.turns, detail=f"{memory.growth_bytes_per_episode:.0f} bytes kept per episode")
    settled = len(memory.transcripts) > 1 and memory.transcripts[-1] == memory.transcripts[-2]
    if settled and memory.transcripts[0] != memory.transcripts[-1]:
        return figure, (f"replaying seed {row.seed} {memory.episodes} times in one worker changed its transcript: state "
                                "leaks from one episode into the next (class attributes, module globals, a shared scenario)", example)
    if max(projected, memory.rss_after_mb) > c.memory_budget_mb:
        return figure, (f"{figure}: projected {projected:.0f} MB after {c.memory_projection_episodes} episodes, over the "
                                f"{c.memory_budget_mb} MB budget; do not keep per-episode data on the env or in module globals", example)
    return figure, None


def _stress(ctx: CheckContext, rows: list[Any], max_steps: int) -> tuple[str, Counterexample] | None:
    """``max_steps + 2`` call-only turns on real values: the episode must stop at ``max_steps``."""
    row = rows[0]
    terminal = set(ctx.info.get("terminal_tools") or [])
    calls = [call for turn in (row.reference.turns if row.reference else []) if isinstance(turn, dict)
             for call in turn.get("calls") or [] if isinstance(call, dict) and call.get("name") not in terminal]
    tools = [t["function"]["name"] for t in ctx.info["tools"] if t["function"]["name"] not in terminal] or ["gate_filler_noop"]
    turns: list[Any] = []
    for index in range(max_steps + 2):
        if calls and index % 2 == 0:
            turns.append({"content": None, "calls": [calls[(index // 2) % len(calls)]]})
        else:
            turns.append({"content": None, "calls": [{"name": tools[index % len(tools)], "arguments": {}}]})
    result = ctx.play(row.seed, turns, where="the max_steps stress episode")
    if result.steps > max_steps:
        return (f"an episode of {len(turns)} call-only turns ran {result.steps} steps, past max_steps={max_steps}",
                Counterexample(seed=row.seed, actions=turns, detail=f"ended_by={result.ended_by}"))
    return None


def _leaks(ctx: CheckContext, rows: list[Any]) -> tuple[str, Counterexample] | None:
    """The reference episodes of the first seeds, replayed now (after hundreds of other episodes in the
    same worker), must give the transcripts the survey recorded at the start. Each is replayed twice: two
    replays that disagree with each other are nondeterminism (the determinism check's finding), not a leak."""
    replay = [r for r in rows[:3] if r.reference is not None]
    results = ctx.play_many([(r.seed, r.reference.turns) for r in replay for _ in range(2)], where="a replay of the reference")
    for row, result, again in zip(replay, results[::2], results[1::2]):
        if result.transcript == again.transcript != row.reference.transcript:
            return (f"the reference episode of seed {row.seed}, replayed in the same worker after other episodes, differs from "
                    "its first run: state leaks from one episode into the next (class attributes, module globals, a shared scenario)",
                    Counterexample(seed=row.seed, actions=row.reference.turns, detail=f"reward {row.reference.reward!r} then {result.reward!r}"))
    return None


def check_budget(ctx: CheckContext) -> CheckResult:
    """CPU time of every generate (uncached), reset and step the gate ran, judged on the 95th percentile
    and the maximum (a maximum over budget is re-timed once, so a stray pause does not fail an env)."""
    c = ctx.config
    figures = ctx.budget_figures()
    problems, counterexample, parts = [], None, []
    for kind, (p95, high, slowest) in figures.items():
        if slowest is None:
            continue
        budget = ctx.budget_of(kind)
        if high > budget * c.budget_max_factor:
            high = min(high, ctx.retime(slowest))
        parts.append(f"{kind} p95 {p95:.1f}/max {high:.1f} ms")
        if p95 > budget or high > budget * c.budget_max_factor:
            problems.append(f"{kind} takes {p95:.0f} ms at the 95th percentile and {high:.0f} ms at most (budget {budget:.0f} ms, "
                            f"no call over {budget * c.budget_max_factor:.0f} ms)")
            counterexample = counterexample or slowest.counterexample()
    count = sum(len(v) for v in ctx.timings.values())
    return CheckResult(
        name="budget", passed=not problems,
        figure=f"{count} calls timed in the worker: " + ", ".join(parts) + f"; budgets reset {c.reset_budget_ms:.0f}, step {c.step_budget_ms:.0f} ms",
        message="; ".join(problems), counterexample=counterexample, seeds=len(ctx.surveys),
    )
