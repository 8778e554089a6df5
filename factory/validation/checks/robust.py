"""Will the env survive training? Robustness (crashes, endings, stress, state, memory), the simulated user's
other paths, and the time budget."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from pydantic import TypeAdapter

from factory.validation.checks.context import NO_SEEDS, BudgetExceeded, CheckContext, Timing
from factory.validation.checks.fuzzing import search
from fuzz.strategies import turn as garbage_turn
from schemas.validation import CheckResult, Counterexample, GenerateTiming, MemoryProbe

MEMORY_ROUNDS = 2  # x2: the first half warms caches up, the second is measured
MEMORY_SLOTS = 3  # different seeds played in turn: state one leaves behind shows in another
_TIMINGS = TypeAdapter(list[GenerateTiming])


def check_robustness(ctx: CheckContext) -> CheckResult:
    """Malformed input never crashes env code; reference episodes end because the task ended (not by
    truncation); a ``max_steps`` stress episode ends in time; no state survives an episode (class or module
    attributes, a shared scenario): episodes replayed in a worker that has served hundreds of others give
    the same transcripts as in a fresh worker and as each other, while what varies with the seed and the
    actions may vary; memory stays within budget now and projected over a training run."""
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
        bad = search(ctx, garbage, lambda cases: ctx.play_many(cases, where="malformed input"), lambda result: bool(result.env_errors))
        if bad is not None:
            errors = ctx.play(bad[0], bad[1], where="malformed input").env_errors
            first = errors[0] if errors else {"where": "?", "error": "?"}
            return CheckResult(**base, figure=f"env error: {first.get('where')}", episodes=ctx.episodes_run - before,
                               message=f"malformed input crashed the env in {first.get('where')}: {first.get('error')}",
                               counterexample=Counterexample(seed=bad[0], actions=bad[1], detail=str(first.get("error"))))
        problem = _stress(ctx, rows, max_steps)
        memory_figure, memory_problem = _memory(ctx, rows[:MEMORY_SLOTS])
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
                   "or a terminal tool must end it (or a tool return sdk.EndEpisode(result))",
                   Counterexample(seed=first_row.seed, actions=first_row.reference.turns, detail=f"ended_by={how}"))  # type: ignore[union-attr]
    figure = (f"{len(rows) - len(unended)}/{len(rows)} reference episodes end by termination; {max_steps}-turn stress "
              f"episode; {memory_figure}")
    return CheckResult(
        name="robustness", passed=problem is None, figure=figure,
        message="" if problem is None else problem[0], counterexample=None if problem is None else problem[1],
        seeds=len(rows), episodes=ctx.episodes_run - before, failing_seeds=[r.seed for r in unended],
    )


def _memory(ctx: CheckContext, rows: list[Any]) -> tuple[str, tuple[str, Counterexample] | None]:
    """Several reference episodes (different seeds) replayed in turn in lane 0, the worker that has served
    the most: memory before and after, the growth each episode keeps (projected over
    ``memory_projection_episodes``), and the transcripts. A transcript that changes from round to round, or
    differs from the fresh worker's, is state surviving an episode; one that differs between seeds is
    seeded variation."""
    c = ctx.config
    plan = [{"seed": r.seed, "turns": r.reference.turns} for r in rows]
    memory = MemoryProbe.model_validate(ctx.call("memory", {"episodes": plan, "rounds": MEMORY_ROUNDS}, c.rpc_timeout_s * 2, seed=rows[0].seed))
    ctx.episodes_run += memory.episodes
    projected = memory.rss_after_mb + memory.growth_bytes_per_episode * c.memory_projection_episodes / 2**20
    figure = (f"memory {memory.rss_before_mb:.0f} -> {memory.rss_after_mb:.0f} MB over {memory.episodes} episodes, "
              f"+{memory.growth_bytes_per_episode / 1024:.1f} KB kept per episode")
    for row, transcripts in zip(rows, memory.transcripts):
        example = Counterexample(seed=row.seed, actions=row.reference.turns, detail="")
        fresh = ctx.fresh_runs.get((row.seed, "the reference transcript"))
        if len(set(transcripts)) > 1:
            example.detail = f"{len(set(transcripts))} different transcripts over {len(transcripts)} replays"
            return figure, (f"replaying seed {row.seed} in one worker, between episodes of other seeds, changed its transcript: "
                            "state survives from one episode into the next (class attributes, module globals, a shared "
                            "scenario); keep per-episode data in the episode's state", example)
        if transcripts and transcripts[0] != row.reference.transcript:
            example.detail = "the survey's first play and every replay in a busier worker disagree"
            return figure, (f"seed {row.seed} replayed after other episodes differs from its first play: state survives from "
                            "one episode into the next (class attributes, module globals, a shared scenario)", example)
        if fresh is not None and fresh.transcript is not None and transcripts and transcripts[0] != fresh.transcript:
            example.detail = "a worker that served hundreds of episodes and a fresh one disagree"
            return figure, (f"seed {row.seed} played in a worker that has served other episodes differs from the same episode in "
                            "a fresh worker: state survives from one episode into the next (class attributes, module globals)", example)
    if max(projected, memory.rss_after_mb) > c.memory_budget_mb:
        example = Counterexample(seed=rows[0].seed, actions=rows[0].reference.turns,
                                 detail=f"{memory.growth_bytes_per_episode:.0f} bytes kept per episode")
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


PATHS = {
    "stalling": ["One moment please, I am still looking into it.", "Still checking, thanks for waiting.", "Just a moment more."],
    "confirmation_loop": ["Shall I go ahead?", "Just to confirm: should I proceed?", "Can I go ahead with that?"],
    "question_loop": ["Could you tell me more about your request?", "Can you give me more details?", "What exactly do you need?"],
    "silence": [""],
}


def check_user_paths(ctx: CheckContext) -> CheckResult:
    """The simulated user driven down its other paths: an agent that stalls, asks for confirmation again and
    again, keeps asking questions, or says nothing, for ``max_steps`` turns. Each episode must end (the user
    closes it, or ``max_steps`` truncates it), every observation must stay bounded (no reply that doubles
    every turn), and none of them may be paid like the reference: a time-out is not a finished task."""
    c = ctx.config
    rows = ctx.generated(min(c.user_path_seeds, len(ctx.seeds)))
    if not rows:
        return CheckResult(name="user_paths", passed=False, message=NO_SEEDS)
    steps = min(int(ctx.info["max_steps"]), c.max_steps_limit)  # a longer max_steps is robustness' finding
    plan = []
    for row in rows:
        for name, lines in PATHS.items():
            chosen = [ctx.rng.choice(lines) for _ in range(steps + 1)]
            plan.append((row, name, [{"content": line, "calls": []} for line in chosen]))
    results = ctx.play_many([(row.seed, turns) for row, _, turns in plan], where="the simulated user's other paths")
    problems, counterexample, endings = [], None, {}
    for (row, name, turns), result in zip(plan, results):
        endings.setdefault(name, set()).add(result.ended_by or "?")
        sizes = result.observation_chars
        grew = any(all(sizes[i + k + 1] >= 1.8 * max(1, sizes[i + k]) and sizes[i + k + 1] > 500 for k in range(3))
                   for i in range(1, len(sizes) - 3))
        example = Counterexample(seed=row.seed, actions=turns[: result.steps], reward=result.reward)
        if max(sizes, default=0) > c.observation_max_chars or grew:
            problems.append(f"{name}: observations grow to {max(sizes)} characters ({sizes[:8]}...): the simulated user must "
                            f"answer in bounded text (at most {c.observation_max_chars} per step)")
        elif result.steps > steps:
            problems.append(f"{name}: the episode ran {result.steps} steps, past max_steps={steps}")
        elif ctx.norm(result.reward) > c.necessity_max_reward and ctx.norm(result.reward) >= ctx.norm(row.reference.reward) - c.exploit_min_drop:  # type: ignore[union-attr]
            problems.append(f"{name}: an agent that only does this gets the reference's reward ({result.reward:.3f}, ended by "
                            f"{result.ended_by}): a conversation that times out or is abandoned is not a finished task")
        if problems and counterexample is None:
            example.detail = problems[-1][:300]
            counterexample = example
            break
    return CheckResult(
        name="user_paths", passed=not problems,
        figure=f"{len(PATHS)} paths x {len(rows)} seeds; endings: " + ", ".join(f"{k} {'/'.join(sorted(v))}" for k, v in endings.items()),
        message="; ".join(problems), counterexample=counterexample, seeds=len(rows), episodes=len(plan),
    )


def check_budget(ctx: CheckContext) -> CheckResult:
    """Time of every generate (uncached), reset and step the gate ran, plus ``generate`` alone on many more
    seeds (stopping at the first slow one), judged on the 95th percentile and the maximum (a maximum over
    ``budget_confirmed_factor`` times the budget is re-timed once, so a stray pause does not fail an env and a
    call slow on some arguments does, however rare those arguments are). Times are wall time less the time
    spent waiting for a CPU, so a sleep or a blocking wait counts and a busy machine does not."""
    c = ctx.config
    _time_generate(ctx)
    figures = ctx.budget_figures()
    problems, counterexample, parts = [], None, []
    for kind, (p95, high, slowest) in figures.items():
        if slowest is None:
            continue
        budget = ctx.budget_of(kind)
        limit = budget * c.budget_confirmed_factor  # re-timed: a call slow on its arguments, not a stray pause
        if high > limit:
            high = min(high, ctx.retime(slowest))
        parts.append(f"{kind} p95 {p95:.1f}/max {high:.1f} ms")
        if p95 > budget or high > limit:
            problems.append(f"{kind} takes {p95:.0f} ms at the 95th percentile and {high:.0f} ms at most, re-timed (budget "
                            f"{budget:.0f} ms, no call over {limit:.0f} ms)")
            counterexample = counterexample or slowest.counterexample()
    count = sum(len(v) for v in ctx.timings.values())
    return CheckResult(
        name="budget", passed=not problems,
        figure=f"{count} calls timed in the worker: " + ", ".join(parts) + f"; budgets reset {c.reset_budget_ms:.0f}, step {c.step_budget_ms:.0f} ms",
        message="; ".join(problems), counterexample=counterexample, seeds=len(ctx.surveys),
    )


def _time_generate(ctx: CheckContext) -> None:
    """``generate`` uncached on ``generate_timing_seeds`` more seeds, spread over the lanes; each lane stops at
    its first seed over the reset budget (confirmed in the worker), so a slow seed ends the probe early."""
    c = ctx.config
    if not c.generate_timing_seeds:
        return
    from factory.validation.checks.context import draw_seeds

    seeds = draw_seeds(ctx.run_seed + 1, c.first_seed, c.generate_timing_seeds)
    size = max(1, -(-len(seeds) // max(1, len(ctx.lanes.envs))))
    calls = [("timing", {"seeds": seeds[i:i + size], "deadline_s": 0.5, "budget_ms": c.reset_budget_ms}, c.rpc_timeout_s)
             for i in range(0, len(seeds), size)]
    for answer in ctx.map(calls, seed=seeds[0]):
        for item in _TIMINGS.validate_python(answer):
            if item.error is None:
                ctx.timings["generate"].append(Timing(item.ms, item.seed, kind="generate"))
    try:
        ctx.check_hard_budget()
    except BudgetExceeded:
        pass  # the verdict below names it with the percentile and the slowest seed
