"""Inside the sandbox: what the validation gate measures about an env, in bulk and timed where the cost is.

Every episode the gate plays goes through a :class:`Driver`: the handler's own ``reset`` and ``step``, the
calls training makes, so an env cannot behave one way for the gate and another for the trainer. The gate
asks for a whole survey of seeds in one call (uncached ``generate`` timed per seed, the first observation,
both solutions played and timed per step), so per-call overhead stays out of the figures and the checks on
the host share one pass over the seeds.

Times are measured here (:class:`Stopwatch`): wall time less the time the process waited for a CPU
(``/proc/self/schedstat``), so a busy machine does not fail a fast env while a sleep, a blocking wait or
a slow loop all count. Memory is measured here too: ``tracemalloc`` growth per episode over repeated
episodes, and the worker's resident size. (Masking and value templates are in
:mod:`trace_env.scenario_values`; decisions, kit fidelity and world invariants in :mod:`trace_env.gate_world`.)

Stdlib only (this runs next to untrusted env code); every figure comes back as JSON the host validates.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import time
import tracemalloc
from typing import Any, Callable, Protocol

from trace_env import gate_thresholds, gate_world
from trace_env.scenario_values import Masker, ValuePool, resolve_turn
from trace_env.sdk import Episode, Scenario, TaskEnv, Turn, canonical_json

MAX_TEXT = 4000
SHOWN_TEXT = 200_000  # what the agent is shown, whole, for the hidden-threshold probe's numbers
CPU_TICK_MS = 10.0


_schedstat: dict[str, int] = {}  # the open /proc/self/schedstat of this process: {"pid": ..., "fd": ...}


def _run_queue_ns() -> int | None:
    """Nanoseconds this process has spent runnable but waiting for a CPU, or None without /proc. The file is
    opened once per process and read again at offset 0 (it is read twice per step timed)."""
    try:
        if _schedstat.get("pid") != os.getpid():  # first use, or a forked child: /proc/self named the parent
            _schedstat.update(pid=os.getpid(), fd=os.open("/proc/self/schedstat", os.O_RDONLY | os.O_CLOEXEC))
        return int(os.pread(_schedstat["fd"], 256, 0).split()[1])
    except (OSError, ValueError, IndexError):
        return None


class Stopwatch:
    """Elapsed milliseconds as the env's own cost: wall time less the time spent waiting for a CPU, so
    sleeps and blocking waits count and contention does not. Without /proc, the wall time capped at the
    CPU time plus one clock tick (some sandboxes advance the CPU clock in 4 ms ticks)."""

    def __init__(self) -> None:
        self.queued = _run_queue_ns()
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def ms(self) -> float:
        wall = (time.perf_counter() - self.wall) * 1000
        queued = _run_queue_ns()
        if self.queued is not None and queued is not None:
            return round(max(0.0, wall - (queued - self.queued) / 1e6), 3)
        cpu = (time.process_time() - self.cpu) * 1000
        return round(min(wall, cpu + CPU_TICK_MS), 3)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:20]


def episode_digests(messages: list[Any], graded: Any) -> tuple[str, str]:
    """(messages digest, transcript digest) of an episode, the messages serialised once; the host computes
    the same pair from what a fresh worker sends back (``factory.validation.checks.variety``)."""
    text = canonical_json(messages)
    transcript = hashlib.sha256((text + "\n" + canonical_json(graded)).encode()).hexdigest()[:20]
    return hashlib.sha256(text.encode()).hexdigest()[:20], transcript


def to_action(item: Any) -> Any:
    return Turn.from_json(item) if isinstance(item, dict) and isinstance(item.get("calls"), list) else item


class Driver(Protocol):
    """The one episode path: what ``trace_env.handler`` serves to training as ``reset`` and ``step``."""

    def reset(self, seed: int) -> dict[str, Any]: ...

    def step(self, action: Any) -> dict[str, Any]: ...

    def scenario(self, seed: int) -> Scenario:
        """The scenario of the episode just reset (for value templates)."""
        ...

    def finish(self) -> dict[str, Any]:
        """Grade the live episode as it stands (the agent stopped); returns the reward detail."""
        ...

    def episode(self) -> Episode: ...

    def env_errors(self) -> list[dict[str, str]]: ...


# --- timed episodes -----------------------------------------------------------------------------


def play(driver: Driver, seed: int, turns: list[Any], templates: bool = False, digest_state: bool = False) -> dict[str, Any]:
    """Play ``turns`` from ``reset(seed)`` through ``driver``, timing reset and every step in the worker.

    The result: the transcript, the reward, how it ended, ``reset_ms``/``step_ms``, the length of every
    observation, digests of the transcript (and, with ``digest_state``, of the final state: big states make
    it dear) and, with ``templates``, the resolved turns.
    """
    watch = Stopwatch()
    first = driver.reset(seed)
    reset_ms = watch.ms()
    pool = ValuePool(driver.scenario(seed)) if templates else None
    if pool is not None:
        pool.heard(str(first["info"]["messages"][-1].get("content", "")))
    played: list[Any] = []
    step_ms: list[float] = []
    observed: list[int] = [len(first["observation"])]
    last: dict[str, Any] | None = None
    for turn in turns:
        if pool is not None:
            turn = resolve_turn(turn, pool, played)
        played.append(turn)
        watch = Stopwatch()
        last = driver.step(turn)
        step_ms.append(watch.ms())
        observed.append(len(last["observation"]))
        if pool is not None:
            for message in last["info"].get("new_messages", []):
                if message.get("role") == "tool":
                    pool.observe(str(message.get("content", "")))
                elif message.get("role") == "user":
                    pool.heard(str(message.get("content", "")))
        if last["terminated"] or last["truncated"]:
            break
    ended_by: str | None
    graded_now = last is None or not (last["terminated"] or last["truncated"])
    if graded_now:
        graded = driver.finish()  # graded as training grades a capped episode; the gate's own name for it
    episode = driver.episode()  # read once the episode has ended (a remote driver asks for it then)
    timed = getattr(driver, "timings", None)
    if timed is not None:  # an episode process of its own timed them: its start is no cost of the env's
        reset_ms, step_ms = timed()
    if graded_now:
        ended_by = "actions_exhausted"
    else:
        graded = last["info"]["reward_detail"]
        ended_by = episode.ended_by
    result = {
        "seed": seed,
        "scenario_hash": first["info"]["scenario_hash"],
        "reward": graded["total"],
        "reward_detail": graded,
        "steps": episode.steps,
        "ended_by": ended_by,
        "messages": episode.messages,
        "env_errors": list(driver.env_errors()),
        "reset_ms": reset_ms,
        "step_ms": step_ms,
        "observation_chars": observed,
        "state_digest": digest(episode.state) if digest_state else "",
    }
    result["messages_digest"], result["transcript"] = episode_digests(episode.messages, graded)
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


SUMMARY_KEYS = ("reward", "steps", "ended_by", "env_errors", "reset_ms", "step_ms", "transcript", "state_digest",
                "messages_digest", "observation_chars")


def summary(episode: dict[str, Any]) -> dict[str, Any]:
    return {k: episode[k] for k in SUMMARY_KEYS}


def survey_seed(
    env: TaskEnv, driver: Driver, seed: int, parrot: bool, remember: Callable[[int, str], None] | None = None,
    light: bool = False, world: bool = False,
) -> dict[str, Any]:
    """One seed, uncached: generate (timed), the first observation, both solutions played through the
    driver. ``light`` leaves out the masked views, decisions and world checks (a replaying peer needs none).

    The solutions get their own copies of the scenario (env code may write to ``scenario.user`` as a
    notepad); episodes get theirs from the handler's scenario cache, as in training.
    """
    scenario, generate_ms = timed_generate(env, seed)
    if not isinstance(scenario, Scenario):
        raise TypeError(f"generate({seed}) returned {type(scenario).__name__}, not sdk.Scenario")
    plain = json.dumps(scenario.to_dict(), default=str)  # key order kept: tool results must read as in training
    if remember is not None:
        remember(seed, plain)
    body = {"state": scenario.state, "user": scenario.user, "truth": scenario.truth, "meta": scenario.meta}
    text = canonical_json(body)

    def copy() -> Scenario:
        return Scenario(**json.loads(plain))

    record: dict[str, Any] = {"seed": seed, "generate_ms": generate_ms, "fingerprint": hashlib.sha256(text.encode()).hexdigest()}
    masker = None if light else Masker(text)
    for which, solve in (("reference", env.reference_solution), ("skipping", env.capability_skipping_solution)):
        turns = [t.to_json() if isinstance(t, Turn) else t for t in solve(copy())]
        played = play(driver, seed, turns, digest_state=which == "reference")
        record[which] = {"turns": turns, "pattern": pattern(turns), **summary(played)}
        if which == "reference":
            messages = played["messages"]
            record["observation_digest"] = digest([m.get("content") for m in messages[:2]])
            system, first = (str(m.get("content") or "") for m in messages[:2])
            record["first_message"] = first[:MAX_TEXT]
            if masker is not None:
                episode = driver.episode()
                record["reference"]["decision"] = gate_world.decision(masker, scenario.state, episode)
                heard = gate_world.heard_text(messages)[:3 * MAX_TEXT]
                record["heard"] = masker.text(heard)
                record["masked_words"] = masker.masked_words(first[:MAX_TEXT] + "\n" + heard)
                if world:
                    record["world"] = gate_world.world_report(env, copy(), episode)
                    record["world"]["truth_order"] = gate_world.truth_order(env, seed)
                    shown = "\n".join([system, first, gate_world.heard_text(messages)])[:SHOWN_TEXT]
                    record["world"]["hidden_threshold"] = gate_thresholds.hidden_threshold(env, copy(), shown)
    if masker is not None:
        record["truth_numbers"] = gate_world.numbers(scenario.truth)
        record.update(
            masked_fingerprint=masker.fingerprint(body),
            truth_digest=digest(scenario.truth),
            masked_truth_digest=masker.fingerprint(scenario.truth),
            masked_observation=masker.text(system[:MAX_TEXT] + "\n" + first[:MAX_TEXT]),
        )
    if parrot:
        record["parrot"] = summary(play(driver, seed, [{"content": first, "calls": []}]))
    return record


def survey(
    env: TaskEnv, driver: Driver, seeds: list[int], deadline_s: float, remember: Callable[[int, str], None] | None = None,
    parrot: frozenset[int] = frozenset(), masked: frozenset[int] | None = None, world: frozenset[int] = frozenset(),
) -> list[dict[str, Any]]:
    """:func:`survey_seed` over ``seeds`` (those in ``parrot`` with the first-message-only agent, those in
    ``masked`` with masked views, all when it is None; those in ``world`` with the world report); a seed whose
    env code raises is reported, not fatal. Stops early (returning what it has) once ``deadline_s`` has
    passed, so a slow env ends quickly."""
    started = time.perf_counter()
    out = []
    for seed in seeds:
        if out and time.perf_counter() - started > deadline_s:
            break
        try:
            light = masked is not None and seed not in masked
            out.append(survey_seed(env, driver, seed, seed in parrot, remember, light, seed in world))
        except Exception as exc:  # env code: one bad seed is a finding, not a crash
            out.append({"seed": seed, "error": f"{type(exc).__name__}: {exc}"[:500]})
    return out


def timed_generate(env: TaskEnv, seed: int) -> tuple[Any, float]:
    """``generate(seed)`` and its ms, timed in the process that runs it: here, or (an env whose type says how,
    ``trace_env.gate_remote.RemoteEnv``) in a fresh process that sends its time back."""
    remote = getattr(type(env), "timed_generate", None)
    if remote is not None:
        return remote(env, seed)
    watch = Stopwatch()
    scenario = env.generate(seed)
    return scenario, watch.ms()


def generate_times(env: TaskEnv, seeds: list[int], deadline_s: float, budget_ms: float) -> list[dict[str, Any]]:
    """``generate`` uncached on many seeds, each timed; stops at the deadline or at the first seed over
    ``budget_ms`` confirmed by a second run (a slow seed is the finding; the rest need not be timed)."""
    started, out = time.perf_counter(), []
    for seed in seeds:
        if out and time.perf_counter() - started > deadline_s:
            break
        watch = Stopwatch()
        try:
            ms = timed_generate(env, seed)[1]
        except Exception as exc:  # a raising seed is the survey's finding, not this probe's
            out.append({"seed": seed, "ms": watch.ms(), "error": f"{type(exc).__name__}"})
            continue
        if ms > budget_ms:
            ms = min(ms, timed_generate(env, seed)[1])
        out.append({"seed": seed, "ms": ms})
        if ms > budget_ms:
            break
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


def memory_probe(driver: Driver, episodes: list[tuple[int, list[Any]]], rounds: int) -> dict[str, Any]:
    """Play ``episodes`` (different seeds and actions) ``2 * rounds`` times under tracemalloc: the growth
    over the second half is what every further episode keeps (the first half fills caches). The
    transcripts come back too: the host tells state surviving an episode (a transcript that changes with
    what the worker did before) from seeded variation (a function of the seed and the actions)."""
    gc.collect()
    before = resident_mb()
    transcripts: list[list[str]] = [[] for _ in episodes]
    tracemalloc.start()
    try:
        marks = []
        for index in range(2 * rounds):
            if index in (rounds, 0):
                gc.collect()
                marks.append(tracemalloc.get_traced_memory()[0])
            for slot, (seed, turns) in enumerate(episodes):
                transcripts[slot].append(play(driver, seed, turns)["transcript"])
        gc.collect()
        marks.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    played = 2 * rounds * len(episodes)
    return {
        "rss_before_mb": round(before, 2),
        "rss_after_mb": round(resident_mb(), 2),
        "episodes": played,
        "growth_bytes_per_episode": max(0.0, (marks[2] - marks[1]) / max(1, rounds * len(episodes))),
        "transcripts": transcripts,
    }
