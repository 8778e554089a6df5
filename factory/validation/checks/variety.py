"""Determinism on the training path (a fresh worker, reset and step only), and diversity of decisions."""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from env_registry.hosted import SandboxedRunner
from factory.validation.checks.context import _EPISODES, MIN_HASH_SEEDS, NO_SEEDS, CheckContext
from pydantic import TypeAdapter

from schemas.validation import CheckResult, Counterexample, GenerateFingerprint, SeedSurvey
from trace_env.gate_probe import episode_digests
from trace_env.sdk import canonical_json


def digest(value: Any) -> str:
    """The worker's digest (``trace_env.gate_probe.digest``), computed on the host from what came back."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:20]


@dataclass
class FreshRun:
    """One episode replayed in the fresh worker through reset and step: what training would have seen."""

    scenario_hash: str
    observation: str
    messages: str
    reward: float | None  # None when the episode did not end (training never grades those)
    transcript: str | None


def replay(runner: SandboxedRunner, seed: int, turns: list[Any] | None) -> FreshRun:
    """``turns`` played exactly as the trainer plays them: ``reset(seed)``, then one ``step`` per turn.
    ``None``: the first-message-only agent (it says back the first user message)."""
    first = runner.reset(seed)
    messages = list(first.info.get("messages") or [])
    if turns is None:
        turns = [{"content": str(messages[-1].get("content") or ""), "calls": []}] if messages else []
    observation = digest([m.get("content") for m in messages[:2]])
    reward, detail = None, None
    for turn in turns:
        result = runner.step(turn)
        messages.append(result.info.get("assistant_message"))
        messages.extend(result.info.get("new_messages") or [])
        if result.terminated or result.truncated:
            reward, detail = float(result.reward), result.info.get("reward_detail")
            break
    messages_digest, transcript = episode_digests(messages, detail)
    return FreshRun(str(first.info.get("scenario_hash")), observation, messages_digest, reward,
                    None if detail is None else transcript)


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


def _difference(run: FreshRun, row: SeedSurvey, theirs: Any, what: str) -> str | None:
    if run.scenario_hash != row.fingerprint:
        return "the scenario"
    if run.observation != row.observation_digest:
        return "the first observation"
    if run.messages != theirs.messages_digest or (run.reward is not None and run.reward != theirs.reward):
        return what
    return None


def _replay_differences(ctx: CheckContext, rows: list[SeedSurvey], workers: list[Any]) -> list[int]:
    """The rows' references dealt round-robin over ``workers`` other than the one that surveyed each (fresh
    workers after their reset/step replays, lanes), each its own hash seed (a fresh env per episode, so a lane is as clean as a new worker), replayed
    at once: the seeds whose transcript differs from the survey's. One replay per row keeps the cost to one
    more pass over the survey's references, while the rows together meet every worker's hash seed."""
    shares: list[list[SeedSurvey]] = [[] for _ in workers]
    for i, row in enumerate(rows):  # never on the worker that surveyed it: every replay compares two hash seeds
        others = [k for k, env in enumerate(workers) if env.worker is not ctx.surveyed_by.get(row.seed)] or list(range(len(workers)))
        shares[others[i % len(others)]].append(row)

    def play(index: int) -> list[tuple[SeedSurvey, Any]]:
        mine = shares[index]
        if not mine:
            return []
        plan = {"episodes": [{"seed": r.seed, "turns": r.reference.turns} for r in mine], "with_messages": False}  # type: ignore[union-attr]
        timeout = min(ctx.config.rpc_timeout_s * 2, sum(ctx.episode_timeout(len(r.reference.turns)) for r in mine))  # type: ignore[union-attr]
        answer = ctx.call_worker(workers[index].worker, "episodes", plan, timeout, mine[0].seed)
        return list(zip(mine, _EPISODES.validate_python(answer)))

    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        results = [pair for part in pool.map(play, range(len(workers))) for pair in part]
    failing = {row.seed for row, result in results if result.transcript != row.reference.transcript}  # type: ignore[union-attr]
    return [row.seed for row in rows if row.seed in failing]


_FINGERPRINTS = TypeAdapter(list[GenerateFingerprint])


SWEEP_WORKERS = 3
"""Workers (each its own hash seed) that sweep ``generate``: two hash seeds put a small set of strings in the
same order about one time in twenty, and an env whose scenario reads that order then passes; three, about one
time in four hundred."""


def _sweep_differences(ctx: CheckContext, workers: list[Any]) -> tuple[list[int], int]:
    """``generate`` on ``determinism_sweep_seeds`` more seeds (drawn like the gate's, so training's windows and
    the whole range) in :data:`SWEEP_WORKERS` workers with different hash seeds, each for at most
    ``determinism_sweep_s``: the seeds whose scenarios differ, and how many were compared. Cheap (no episodes),
    so it meets a region of seeds that depends on hash order (a few percent of the range) that the replayed
    references may miss."""
    c = ctx.config
    pair = workers[:SWEEP_WORKERS]
    if len(pair) < 2 or not c.determinism_sweep_seeds:
        return [], 0
    from factory.validation.checks.context import draw_seeds

    seeds = draw_seeds(ctx.run_seed + 2, c.first_seed, c.determinism_sweep_seeds)
    params = {"seeds": seeds, "deadline_s": c.determinism_sweep_s}

    def sweep(env: Any) -> dict[int, str]:
        answer = ctx.call_worker(env.worker, "fingerprints", params, c.rpc_timeout_s + c.determinism_sweep_s, seeds[0])
        return {item.seed: item.fingerprint for item in _FINGERPRINTS.validate_python(answer) if item.fingerprint}

    with ThreadPoolExecutor(max_workers=len(pair)) as pool:
        swept = list(pool.map(sweep, pair))
    everywhere = [s for s in seeds if all(s in one for one in swept)]
    return [s for s in everywhere if len({one[s] for one in swept}) > 1], len(everywhere)


def check_determinism(ctx: CheckContext) -> CheckResult:
    """The survey's first seeds replayed in fresh workers started exactly as training starts one (each its own
    random hash seed, the same module name) and driven exactly as the trainer drives it: ``reset`` and one
    ``step`` per turn, nothing else; the first-message-only agent before the reference, where the gate's
    workers played the reference first, and the capability-skipping solution after it (necessity's verdict
    comes from the gate's workers, where the gate's one-shot calls ran: a mark such a call leaves in its worker,
    the pid counter of its namespace say, must not make those episodes differ from training's,
    tests/gate/test_red_team.py); then every surveyed reference once more, dealt over
    :data:`MIN_HASH_SEEDS` workers (the fresh ones, spares where the lanes are few, lanes), each its own hash
    seed, as many on one lane as on eight. Every scenario, first observation, transcript and reward must equal what the gate's
    survey saw. This is the one-path check: an env that behaves one way under the
    gate and another in training, draws from an unseeded generator, reads the clock, or depends on string
    hashing, differs here."""
    count = min(ctx.config.determinism_seeds, len(ctx.seeds))
    ours = [r for r in ctx.survey(count) if r.error is None and r.reference is not None]
    workers = ctx.fresh_workers(MIN_HASH_SEEDS)
    fresh = workers[0]
    compared, found = 0, None
    failing: list[int] = []
    runner = SandboxedRunner(fresh)
    for row in ours:  # every seed, even after a difference: robustness compares its replays with these
        plan: list[tuple[str, list[Any] | None, Any]] = []
        if row.parrot is not None:  # first, where the gate played it last: another sequence before the reference
            plan.append(("the first-message-only transcript", None, row.parrot))
        plan.append(("the reference transcript", row.reference.turns, row.reference))  # type: ignore[union-attr]
        skipping = row.skipping  # what necessity judged, played where a gate-only call may have marked the worker
        if skipping is not None and math.isfinite(skipping.reward):
            plan.append(("the capability-skipping transcript", skipping.turns, skipping))
        for what, turns, theirs in plan:
            run = ctx.fresh_call(lambda: replay(runner, row.seed, turns), row.seed, turns or [])
            compared += 1
            ctx.fresh_runs[(row.seed, what)] = run
            problem = _difference(run, row, theirs, what)
            if problem is not None:
                if row.seed not in failing:
                    failing.append(row.seed)
                found = found or (row, problem, turns if turns is not None else [{"content": row.first_message, "calls": []}])
    wide = ctx.generated(min(ctx.config.solvability_seeds, len(ctx.seeds)))  # surveyed anyway, for solvability
    replayers = [*workers, *ctx.lanes.ready()][:MIN_HASH_SEEDS]  # as many on one lane as on eight
    lane_failing = _replay_differences(ctx, wide, replayers) if wide else []
    compared += len(wide)
    hash_seeds = len({getattr(env, "hash_seed", id(env)) for env in replayers})
    swept_failing, swept = _sweep_differences(ctx, replayers)
    if found is None and swept_failing:
        seed = swept_failing[0]
        return CheckResult(
            name="determinism", passed=False, seeds=swept, episodes=compared, failing_seeds=swept_failing[:50],
            figure=f"generate({seed}) differs between workers with different hash seeds ({len(swept_failing)}/{swept} "
            "seeds of the sweep differ)",
            message=f"generate() gives another scenario for the same seed in another worker ({len(swept_failing)}/{swept} "
            "seeds): the scenario depends on string hashing (the order of a set of strings, hash()) or on other state "
            "of the process; build it from self.rng(seed) only, and sort any set before choosing from it",
            counterexample=Counterexample(seed=seed, detail=f"generate({seed}) hashed differently in two fresh workers"),
        )
    if found is None and lane_failing:
        row = next(r for r in wide if r.seed == lane_failing[0])
        found = (row, "the reference transcript", row.reference.turns)  # type: ignore[union-attr]
        failing = lane_failing
        fresh = next((env for env in replayers if env is not ctx.env), fresh)
    if found is not None:
        row, problem, turns = found
        failing = sorted(set(failing) | set(lane_failing), key=ctx.index.__getitem__)
        return CheckResult(
            name="determinism", passed=False, seeds=len(ours), episodes=compared,
            figure=f"{problem} of seed {row.seed} differs between workers driven like training ({len(failing)}/{max(len(ours), len(wide))} "
            f"seeds differ; {hash_seeds} hash seeds)",
            message=f"{problem} differs for the same seed and actions between a fresh worker driven like training "
            "(reset and step only, its own hash seed) and a worker that had served other episodes: use only "
            "self.rng(seed) for randomness, keep no random generator or state on the env object, its class or the "
            "module, never read the clock, never let content depend on the order of a set of strings or on hash(), "
            "and behave the same whoever calls",
            counterexample=Counterexample(seed=row.seed, actions=turns if "transcript" in problem else [],
                                          detail=_explain(ctx, fresh, row, problem, turns)),
            failing_seeds=failing,
        )
    return CheckResult(
        name="determinism", passed=True, seeds=len(ours), episodes=compared,
        figure=f"{len(ours)} seeds identical in fresh workers driven like training, {len(wide)} references replayed over "
        f"{len(replayers)} workers (scenarios, first observations, {compared} transcripts and rewards; {hash_seeds} hash seeds); "
        f"generate swept on {swept} more seeds in {min(SWEEP_WORKERS, len(replayers))} workers with different hash seeds",
        data={"hash_seeds": hash_seeds, "swept": swept},
    )


def _explain(ctx: CheckContext, fresh: Any, row: SeedSurvey, what: str, turns: list[Any]) -> str:
    """Fetch the differing scenario (or transcript) from both workers and name the first difference."""
    try:
        if what in ("the scenario", "the first observation"):
            params = {"seed": row.seed, "with_scenario": True}
            a = ctx.call("generate", params, ctx.config.rpc_timeout_s)["scenario"]
            b = fresh.call("generate", params, timeout_s=ctx.config.rpc_timeout_s)["scenario"]
            return f"generate({row.seed}): {first_difference(a, b)}"
        params = {"seed": row.seed, "turns": turns, "with_messages": True}
        a = ctx.call("episode", params, ctx.config.rpc_timeout_s)
        b = fresh.call("episode", params, timeout_s=ctx.config.rpc_timeout_s)
        return f"seed {row.seed}: {first_difference({'messages': a['messages'], 'reward': a['reward']}, {'messages': b['messages'], 'reward': b['reward']})}"
    except Exception as exc:  # the explanation is a courtesy: the verdict stands without it
        return f"(could not fetch both for a diff: {type(exc).__name__})"


def check_diversity(ctx: CheckContext) -> CheckResult:
    """Distinct scenarios, still distinct with ids and names masked, a ground truth that varies, and
    reference decisions that vary: the calls with their arguments, the state they leave and the yes/no
    words of the answers (ids and names masked), so a decision that lives in an argument or an answer
    counts, and one that is the same recipe on every seed does not."""
    c = ctx.config
    rows = ctx.generated(min(c.diversity_seeds, len(ctx.seeds)))
    if len(rows) < 2:
        return CheckResult(name="diversity", passed=False, figure=f"{len(rows)} scenarios", message=NO_SEEDS)
    raw = len({r.fingerprint for r in rows})
    masked = Counter(r.masked_fingerprint for r in rows)
    truths = len({r.truth_digest for r in rows})
    decisions = Counter(r.reference.decision for r in rows if r.reference is not None)
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
        problems.append("the ground truth is the same for every seed")
    if len(decisions) < c.diversity_min_patterns:
        problems.append(f"the reference decides the same on every seed ({len(decisions)} distinct decision(s): the same calls "
                        "with the same arguments, the same state change and the same answer, ids and names masked); vary which "
                        "rule decides so that the right actions, arguments or answers differ")
        first = rows[0]
        counterexample = counterexample or Counterexample(seed=first.seed, actions=first.reference.turns,  # type: ignore[union-attr]
                                                          detail="the reference's decision on every seed")
    return CheckResult(
        name="diversity",
        passed=not problems,
        figure=f"{raw}/{len(rows)} distinct scenarios, {len(masked)} with ids/names masked, {truths} ground truths, "
        f"{len(decisions)} reference decisions ({patterns} tool-call patterns)",
        message="; ".join(problems),
        counterexample=counterexample,
        seeds=len(rows),
        data={"decisions": len(decisions), "patterns": patterns, "masked": len(masked)},
    )
