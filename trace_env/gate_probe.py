"""Inside the sandbox: what the validation gate measures about an env, in bulk and timed where the cost is.

The gate asks for a whole survey of seeds in one call (uncached ``generate`` timed per seed, the first
observation, the two solutions played and timed per step), so per-call overhead stays out of the figures
and the checks on the host share one pass over the seeds. Times are measured here, in the worker, and
capped by CPU time (:class:`Stopwatch`): env code cannot sleep or wait on I/O, so its cost is CPU, and a
busy machine does not fail a fast env. Three tools serve the checks:

- masking: ids and names replaced by placeholders numbered in order of appearance, so "scenarios that
  differ only in an id" hash equal;
- templates: fuzzed actions may name values instead of spelling them (``{"$pool": 3, "type": "string"}``:
  the 3rd string of the scenario or of earlier tool results; ``"mutate"``: the same value changed in one
  character, well-formed but unknown; ``"like"``: another value of the same shape); ``{"$repeat": j}``
  replays turn j. They are resolved here, where the scenario is, and the resolved turns are returned so
  every counterexample replays as plain JSON;
- memory: ``tracemalloc`` growth per episode over repeated episodes, and the worker's resident size.

Stdlib only (this runs next to untrusted env code); every figure comes back as JSON the host validates.
"""

from __future__ import annotations

import gc
import hashlib
import json
import re
import time
import tracemalloc
from typing import Any, Callable

from trace_env.engine import EpisodeRunner, StepResult
from trace_env.sdk import Scenario, TaskEnv, Turn, canonical_json

TERMINATED = ("user", "tool:")
MAX_POOL = 400
MAX_TEXT = 4000

_ID_KEY = re.compile(r"(?:^|_)(?:id|ids|name|email|username|phone|phone_number|uuid)$", re.IGNORECASE)
_ID_SHAPE = re.compile(r"^(?=[^ ]*\d)[A-Za-z0-9_#.\-@+]{4,64}$|^[A-Z0-9]{5,12}$")
_NOT_ID = re.compile(r"^\d{4}-\d{2}-\d{2}|^\d{1,2}:\d{2}|^[-+]?\d+(\.\d+)?$")
_TOKEN = re.compile(r"[#A-Za-z0-9_@+'](?:[A-Za-z0-9_.\-@+']*[A-Za-z0-9_])?")
_KEYED = re.compile(r'"([^"\\]{1,64})":"((?:[^"\\]|\\.){1,80})"')


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


# --- masking ------------------------------------------------------------------------------------


def looks_like_id(text: str) -> bool:
    return bool(_ID_SHAPE.match(text)) and not _NOT_ID.match(text)


class Masker:
    """Replaces the ids and names of one scenario by ``<id>``, so scenarios that differ only in those hash equal.

    Ids are tokens that look like ids (``#W2271620``, ``mia_li_3668``, ``4NC8I6``, emails); names are the
    words of values under keys such as ``name``, ``first_name``, ``user_id``. Both are found in the
    scenario's canonical JSON text and masked with one regex over text (C speed, it matters for big
    states). A mapping keyed by ids counts as the sorted list of its masked values, so the random order of
    ids cannot tell seeds apart.
    """

    def __init__(self, canonical_text: str) -> None:
        keyed = {
            word
            for key, value in _KEYED.findall(canonical_text)
            if _ID_KEY.search(key) and len(value.split()) <= 4
            for word in value.split()
            if len(word) >= 2
        }
        self.names = {token for token in set(_TOKEN.findall(canonical_text)) if token in keyed or looks_like_id(token)}
        ordered = sorted(self.names, key=len, reverse=True)
        self._pattern = re.compile(r"(?<![\w#@.+'-])(?:" + "|".join(map(re.escape, ordered)) + r")(?![\w@+'-]|\.\w)") if ordered else None

    def text(self, text: str) -> str:
        return self._pattern.sub("<id>", text) if self._pattern is not None else text

    def _ordered(self, value: Any) -> Any:
        """The value with every id-keyed mapping turned into the list of its values, sorted as masked text
        (parts without such a mapping are returned as they are, not copied)."""
        if isinstance(value, dict):
            if value and all(isinstance(k, str) and k in self.names for k in value):
                return sorted((self._ordered(v) for v in value.values()), key=lambda v: self.text(canonical_json(v)))
            out = None
            for k, v in value.items():
                if isinstance(v, (dict, list)):
                    new = self._ordered(v)
                    if new is not v:
                        out = out if out is not None else dict(value)
                        out[k] = new
            return value if out is None else out
        if isinstance(value, list):
            items = [self._ordered(v) if isinstance(v, (dict, list)) else v for v in value]
            return value if all(a is b for a, b in zip(items, value)) else items
        return value

    def fingerprint(self, value: Any) -> str:
        return hashlib.sha256(self.text(canonical_json(self._ordered(value))).encode()).hexdigest()[:20]


# --- value pools and templates -----------------------------------------------------------------


Entry = tuple[str, Any, str]  # (type name, value, the key it was found under)


def _leaves(value: Any, out: list[Entry], key: str = "", depth: int = 0) -> None:
    """Leaf values of a JSON value with the key each sits under (a mapping keyed by ids gives its keys
    under the singular of its own key: ``reservations`` -> ``reservation_id``)."""
    if len(out) >= MAX_POOL or depth > 12:
        return
    if isinstance(value, dict):
        for k in value:
            if isinstance(k, str) and looks_like_id(k):
                out.append(("str", k, key.rstrip("s") + "_id" if key else "id"))
            _leaves(value[k], out, str(k), depth + 1)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, out, key, depth + 1)
    elif isinstance(value, (bool, int, float)):
        out.append((type(value).__name__, value, key))
    elif isinstance(value, str) and 0 < len(value) <= 64 and "\n" not in value:
        out.append(("str", value, key))


def shape(value: Any) -> str:
    """A value's kind, for "another value like this one": for strings the punctuation skeleton and the
    letter case (``#W2271620`` ~ ``#W8504689``, ``mia_li_3668`` ~ ``noah_kim_1204``), plus the length when
    there is no punctuation (``4NC8I6`` ~ ``ZF6XMJ``); for numbers, int or float."""
    if isinstance(value, str):
        skeleton = "".join(c for c in value if not c.isalnum() and c != " ")
        case = "digits" if value.isdigit() else "upper" if value.isupper() else "lower" if value.islower() else "mixed"
        return f"{skeleton}|{case}|{len(value) if not skeleton else ''}|{' ' in value}"
    return type(value).__name__


def mutate(value: Any, salt: int = 0) -> Any:
    """Well-formed but unknown: one character changed within its class, or a number nudged."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1 + salt % 7
    if isinstance(value, float):
        return round(value + 1.0 + salt % 7, 2)
    if isinstance(value, str) and value:
        positions = [i for i, c in enumerate(value) if c.isalnum()] or [len(value) - 1]
        i = positions[-1 - salt % len(positions)]
        c = value[i]
        if c.isdigit():
            c = str((int(c) + 1 + salt % 8) % 10)
        elif c.isupper():
            c = chr((ord(c) - 65 + 1 + salt % 24) % 26 + 65)
        elif c.islower():
            c = chr((ord(c) - 97 + 1 + salt % 24) % 26 + 97)
        else:
            c = "x"
        return value[:i] + c + value[i + 1:]
    return value


class ValuePool:
    """Values an agent could have seen: the scenario's (state and user) and those of earlier tool results.
    Collected lazily: most turns of most episodes name no template, and big states are slow to walk."""

    def __init__(self, scenario: Scenario) -> None:
        self._source = scenario
        self._texts: list[str] = []
        self._ready = False
        self.scenario: list[Entry] = []
        self.seen: list[Entry] = []

    def observe(self, text: str) -> None:
        if self._ready:
            self._add(text)
        else:
            self._texts.append(text)

    def _add(self, text: str) -> None:
        if len(self.seen) >= MAX_POOL:
            return
        try:
            value = json.loads(text)
        except (ValueError, TypeError):
            value = [t for t in _TOKEN.findall(text or "") if looks_like_id(t)]
        found: list[Entry] = []
        _leaves(value, found)
        for item in found:
            if item not in self.seen:
                self.seen.append(item)

    def _load(self) -> None:
        if not self._ready:
            found: list[Entry] = []
            _leaves({"state": self._source.state, "user": self._source.user}, found)
            self.scenario = list(dict.fromkeys(found))
            self._ready = True
            for text in self._texts:
                self._add(text)

    def pick(self, spec: dict[str, Any]) -> Any:
        """The value a template names. Values found under the argument's own name come first (a
        ``reservation_id`` argument gets reservation ids), then id-like values for ``*_id`` arguments,
        then any value of the type."""
        self._load()
        index = int(spec.get("$pool") or 0)
        wanted = {"string": ("str",), "integer": ("int",), "number": ("int", "float"), "boolean": ("bool",)}.get(
            str(spec.get("type")), ("str", "int", "float")
        )
        key = str(spec.get("key") or "")
        sources = [self.seen, self.scenario] if spec.get("from") == "seen" else [self.scenario, self.seen]
        candidates: list[Any] = []
        for source in sources:
            typed = [(v, k) for t, v, k in source if t in wanted]
            candidates = [v for v, k in typed if key and k == key]
            if not candidates and key.endswith("id"):
                candidates = [v for v, _ in typed if isinstance(v, str) and looks_like_id(v)]
            candidates = list(dict.fromkeys(candidates or [v for v, _ in typed]))
            if candidates:
                break
        if "like" in spec:
            original = spec["like"]
            same = [v for v in candidates if v != original and shape(v) == shape(original)]
            return same[index % len(same)] if same else mutate(original, index)
        if not candidates:
            return {"str": "x", "int": 0, "float": 0.0, "bool": False}[wanted[0]]
        value = candidates[index % len(candidates)]
        return mutate(value, index) if spec.get("mutate") else value

    def resolve(self, value: Any) -> Any:
        if isinstance(value, dict):
            if "$pool" in value:
                return self.pick(value)
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value


def resolve_turn(turn: Any, pool: ValuePool, done: list[Any]) -> Any:
    if isinstance(turn, dict) and "$repeat" in turn:
        return done[int(turn["$repeat"]) % len(done)] if done else {"content": None, "calls": []}
    if not isinstance(turn, dict):
        return turn
    resolved = pool.resolve(turn)
    if isinstance(resolved.get("content"), list):
        resolved["content"] = " ".join(str(part) for part in resolved["content"])
    return resolved


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
