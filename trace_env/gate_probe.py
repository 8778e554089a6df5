"""Inside the sandbox: what the validation gate measures about an env, in bulk and timed where the cost is.

The gate asks for a whole survey of seeds in one call (uncached ``generate`` timed per seed, the first
observation, the two solutions played and timed per step), so per-call overhead stays out of the figures
and the checks on the host share one pass over the seeds. Times are measured here, in the worker, and
capped by CPU time (:class:`Stopwatch`): env code cannot sleep or wait on I/O, so its cost is CPU, and a
busy machine does not fail a fast env. Memory is measured here too: ``tracemalloc`` growth per episode
over repeated episodes, and the worker's resident size. (Masking and value templates are in
:mod:`trace_env.scenario_values`.)

Stdlib only (this runs next to untrusted env code); every figure comes back as JSON the host validates.
"""

from __future__ import annotations

import gc
import hashlib
import json
import time
import tracemalloc
from typing import Any, Callable

from trace_env.engine import EpisodeRunner, StepResult
from trace_env.scenario_values import Masker, ValuePool, resolve_turn
from trace_env.sdk import Scenario, TaskEnv, Turn, canonical_json

MAX_TEXT = 4000
CPU_TICK_MS = 10.0


class Stopwatch:
    """Elapsed milliseconds, robust to a busy machine and to coarse CPU clocks: the wall time, but never
    more than the CPU time plus one clock tick (in some sandboxes the CPU clock advances in 4 ms ticks)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def ms(self) -> float:
        wall = (time.perf_counter() - self.wall) * 1000
        cpu = (time.process_time() - self.cpu) * 1000
        return round(min(wall, cpu + CPU_TICK_MS), 3)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:20]


def fresh(scenario: Scenario) -> Scenario:
    """A private copy (JSON round trip: cheaper than deepcopy, and what crosses the wire anyway)."""
    return Scenario(**json.loads(json.dumps(scenario.to_dict(), default=str)))


def to_action(item: Any) -> Any:
    return Turn.from_json(item) if isinstance(item, dict) and isinstance(item.get("calls"), list) else item


# --- timed episodes -----------------------------------------------------------------------------


def play(env: TaskEnv, seed: int, turns: list[Any], scenario: Scenario, templates: bool = False) -> dict[str, Any]:
    """Play ``turns`` from ``reset``, timing reset and every step inside the worker.

    The same contract as :func:`trace_env.engine.run_episode` (the transcript, the reward, how it ended),
    plus ``reset_ms``/``step_ms``, a transcript digest and, with ``templates``, the resolved turns.
    """
    runner = EpisodeRunner(env)
    watch = Stopwatch()
    first = runner.reset(seed, scenario)
    reset_ms = watch.ms()
    pool = ValuePool(scenario) if templates else None
    played: list[Any] = []
    step_ms: list[float] = []
    last: StepResult | None = None
    for turn in turns:
        if pool is not None:
            turn = resolve_turn(turn, pool, played)
        played.append(turn)
        watch = Stopwatch()
        last = runner.step(to_action(turn))
        step_ms.append(watch.ms())
        if pool is not None:
            for message in last.info.get("new_messages", []):
                if message.get("role") == "tool":
                    pool.observe(str(message.get("content", "")))
        if last.terminated or last.truncated:
            break
    episode = runner.episode
    assert episode is not None
    if last is None or not (last.terminated or last.truncated):
        graded = runner.grade()
        runner.done = True
        episode.ended_by = episode.ended_by or "actions_exhausted"
    else:
        graded = last.info["reward_detail"]
    result = {
        "seed": seed,
        "scenario_hash": first.info["scenario_hash"],
        "reward": graded["total"],
        "reward_detail": graded,
        "steps": episode.steps,
        "ended_by": episode.ended_by,
        "messages": episode.messages,
        "env_errors": list(runner.env_errors),
        "reset_ms": reset_ms,
        "step_ms": step_ms,
    }
    result["transcript"] = digest([episode.messages, graded])
    if templates:
        result["actions"] = played
    return result


def pattern(turns: list[Any]) -> list[str]:
    """What a solution does, without its arguments: one entry per turn (``say`` or the tools called)."""
    out = []
    for turn in turns:
        calls = turn.get("calls") if isinstance(turn, dict) else None
        out.append("+".join(str(c.get("name")) for c in calls if isinstance(c, dict)) if calls else "say")
    return out


def _summary(episode: dict[str, Any]) -> dict[str, Any]:
    return {k: episode[k] for k in ("reward", "steps", "ended_by", "env_errors", "reset_ms", "step_ms", "transcript")}


def survey_seed(
    env: TaskEnv, seed: int, parrot: bool, remember: Callable[[int, str], None] | None = None, light: bool = False
) -> dict[str, Any]:
    """One seed, uncached: generate (timed), the first observation, both solutions played. ``light`` leaves
    out the masked views (a peer worker that only replays for comparison needs none).

    Every use gets its own copy of the scenario (env code may write to ``scenario.user`` as a notepad; in
    training each reset gets a fresh one too), made from one canonical JSON text.
    """
    watch = Stopwatch()
    scenario = env.generate(seed)
    generate_ms = watch.ms()
    if not isinstance(scenario, Scenario):
        raise TypeError(f"generate({seed}) returned {type(scenario).__name__}, not sdk.Scenario")
    plain = json.dumps(scenario.to_dict(), default=str)  # key order kept: tool results must read as in training
    if remember is not None:
        remember(seed, plain)
    body = {"state": scenario.state, "user": scenario.user, "truth": scenario.truth, "meta": scenario.meta}
    text = canonical_json(body)

    def copy() -> Scenario:
        return Scenario(**json.loads(plain))

    system, first = str(env.system_prompt(copy())), str(env.first_user_message(copy()))
    record: dict[str, Any] = {
        "seed": seed,
        "generate_ms": generate_ms,
        "fingerprint": hashlib.sha256(text.encode()).hexdigest(),
        "observation_digest": digest([system, first]),
        "first_message": first[:MAX_TEXT],
    }
    if not light:
        masker = Masker(text)
        record.update(
            masked_fingerprint=masker.fingerprint(body),
            truth_digest=digest(scenario.truth),
            masked_truth_digest=masker.fingerprint(scenario.truth),
            masked_observation=masker.text(system[:MAX_TEXT] + "\n" + first[:MAX_TEXT]),
        )
    for which, solve in (("reference", env.reference_solution), ("skipping", env.capability_skipping_solution)):
        turns = [t.to_json() if isinstance(t, Turn) else t for t in solve(copy())]
        record[which] = {"turns": turns, "pattern": pattern(turns), **_summary(play(env, seed, turns, copy()))}
    if parrot:
        record["parrot"] = _summary(play(env, seed, [{"content": first, "calls": []}], copy()))
    return record


def survey(
    env: TaskEnv, seeds: list[int], parrot_seeds: int, deadline_s: float, remember: Callable[[int, str], None] | None = None,
    masked_seeds: int | None = None,
) -> list[dict[str, Any]]:
    """:func:`survey_seed` over ``seeds`` (the first ``parrot_seeds`` with the first-message-only agent, the
    first ``masked_seeds`` with masked views); a seed whose env code raises is reported, not fatal.
    Stops early (returning what it has) once ``deadline_s`` has passed, so a slow env ends quickly."""
    started = time.perf_counter()
    out = []
    for index, seed in enumerate(seeds):
        if out and time.perf_counter() - started > deadline_s:
            break
        try:
            light = masked_seeds is not None and index >= masked_seeds
            out.append(survey_seed(env, seed, index < parrot_seeds, remember, light))
        except Exception as exc:  # env code: one bad seed is a finding, not a crash
            out.append({"seed": seed, "error": f"{type(exc).__name__}: {exc}"[:500]})
    return out


# --- memory ---------------------------------------------------------------------------------------


def resident_mb() -> float:
    """The worker's resident set size, from /proc (peak RSS from rusage where /proc is not mounted)."""
    try:
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[1])
        import resource

        return pages * resource.getpagesize() / 2**20
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_probe(env: TaskEnv, seed: int, turns: list[Any], scenario_of: Callable[[int], Scenario], episodes: int) -> dict[str, Any]:
    """Play the same episode ``2 * episodes`` times under tracemalloc: the growth over the second half is
    what every further episode keeps (the first half fills caches). The transcripts come back too: the
    host tells state leaking between episodes (they change, then settle) from nondeterminism."""
    gc.collect()
    before = resident_mb()
    transcripts = []
    tracemalloc.start()
    try:
        marks = []
        for index in range(2 * episodes):
            if index in (episodes, 0):
                gc.collect()
                marks.append(tracemalloc.get_traced_memory()[0])
            transcripts.append(play(env, seed, turns, scenario_of(seed))["transcript"])
        gc.collect()
        marks.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    return {
        "rss_before_mb": round(before, 2),
        "rss_after_mb": round(resident_mb(), 2),
        "episodes": 2 * episodes,
        "growth_bytes_per_episode": max(0.0, (marks[2] - marks[1]) / episodes),
        "transcripts": transcripts,
    }
