"""Inside the sandbox: the env as the gate's probe process sees it under the shim's fresh processes.

Env code is assumed able to take over the interpreter it runs in, so the process that computes the gate's
figures (the one-call process serving ``survey``, ``episode``, ``timing``, ...) runs none of it: each env method a
probe needs is a sub-call (``sandbox.worker.subcall``) that the shim serves in a fresh process forked from the
template (:mod:`sandbox.template`), ended after its one reply. Episodes go to an episode process of their own
(:class:`RemoteDriver`: ``reset``, ``step``, ``truncate``, then ``record``); every other method is a one-shot
call (:data:`ONE_SHOT`: ``env_generate``, ``env_seed``, ``env_solution``, ``env_initial_state``, ``env_derive_truth``,
``env_derive_truths``, ``env_describe``, ``env_truth_marks``; served by :mod:`trace_env.gate_calls`).
``env_derive_truths`` asks many independent counterfactual questions of one process (the hidden-threshold
probe's moves, :func:`truths`), each of a fresh env object on its own copy of the state. Only JSON comes back,
the env's word, checked by shape here; what env code does to its own process (rewriting ``gate_probe``) ends with it.
Generate's time is measured in the process that runs it (``gate_probe.Stopwatch``) and sent back.
The survey asks an ``env_seed`` process (:func:`seed_answers`) for a seed's generate and both solutions of its
scenario (on a world seed also ``initial_state``, ``derive_truth`` of the start state as the world report and the
hidden-threshold probe ask it, the truth marks, and the env's description), each on a fresh env, and goes on to the
survey's next seeds while that process is within :data:`AHEAD_S` and :data:`BATCH_CHARS`: one process for many
seeds where there were three to seven per seed. A later seed's env code thus runs in a process where an earlier
seed's ran (each on a freshly executed module, as on the one-process path within one call; what env code leaves
outside its module is the integrity check's); the episodes stay one process each. Each answer is used once, for
the very question it answers (same scenario, state and key order); any other question is a one-shot of its own.

Stdlib only.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from trace_env.sdk import Episode, Scenario, ToolRecord

#: The one-shot sub-calls: each in a fresh process of its own (see sandbox.relay.SUB_CALLS).
ONE_SHOT = frozenset({"env_generate", "env_seed", "env_solution", "env_initial_state", "env_derive_truth", "env_derive_truths",
                      "env_describe", "env_truth_marks"})
#: The most state JSON one ``env_derive_truths`` call carries (the rest goes in further calls): far below a line's cap.
BATCH_CHARS = 4 * 1024 * 1024
#: How long an ``env_seed`` process goes on to the survey's next seeds once it has answered the first.
AHEAD_S = 0.1
_calls: list[Any] = []  # the worker's sub-call, in a process forked from the template (sandbox.template)


def attach(call: Any) -> None:
    _calls[:] = [call]


def attached() -> bool:
    return bool(_calls)


def call(method: str, params: dict[str, Any]) -> Any:
    """A sub-call; an error answer raises an exception named as the error's type (env code's own, say)."""
    try:
        return _calls[0](method, params)
    except Exception as exc:
        kind = getattr(exc, "kind", None)
        if kind is None:
            raise
        raise _named(str(kind), str(exc)) from None


def _named(kind: str, message: str) -> Exception:
    return type(kind, (RuntimeError,), {})(message)


class BadAnswer(RuntimeError):
    """A one-shot process answered something of the wrong shape."""


def _object(value: Any, what: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise BadAnswer(f"{what} is not a JSON object")
    return value


def scenario_from(data: Any) -> Scenario:
    """A scenario from its JSON (an env process's answer), checked by shape."""
    data = _object(data, "the scenario")
    if set(data) != {"seed", "state", "user", "truth", "meta"} or type(data["seed"]) is not int:
        raise BadAnswer("the scenario has not the fields seed, state, user, truth and meta")
    return Scenario(**data)


class RemoteEnv:
    """What the probes read of the env, each method asked of a fresh process (see the module docstring)."""

    def __init__(self, seeds: list[int] | None = None, world: frozenset[int] = frozenset()) -> None:
        """``seeds``: the survey's, in order: generate asks ``env_seed`` for this seed and the next; ``world``: the
        seeds whose world questions come with it."""
        self._facts: dict[str, Any] | None = None
        self._bundled, self._order, self._world = seeds is not None, list(seeds or []), world
        self._ahead: dict[int, dict[str, Any]] = {}  # seed -> env_seed's answer, not yet asked for
        self._early: dict[tuple[str, ...], list[dict[str, Any]]] = {}  # a question -> env_seed's answers to it

    def _describe(self) -> dict[str, Any]:
        if self._facts is None:
            self._facts = _facts(call("env_describe", {}))
        return self._facts

    def _answered(self, *question: str) -> Any:
        """env_seed's answer to ``question`` (used once), or ``_ASK`` where it has none."""
        answers = self._early.get(question)
        if not answers:
            return _ASK
        part = answers.pop(0)
        if "error" in part:
            raise _named(part["error"]["type"], part["error"]["message"])
        return part["value"]

    @property
    def target(self) -> str:
        return str(self._describe()["target"])

    @property
    def tool_domain(self) -> Any:
        return self._describe().get("tool_domain")

    @property
    def write_tools(self) -> frozenset[str]:
        return frozenset(str(t) for t in self._describe()["write_tools"])

    def generated(self, seed: int, with_scenario: bool = True) -> dict[str, Any]:
        """``generate(seed)`` in a fresh process: its answer (``scenario``, ``generate_ms`` as timed there)."""
        answer = _object(call("env_generate", {"seed": seed, "with_scenario": with_scenario}), "generate")
        ms = answer.get("generate_ms")
        if type(ms) not in (int, float) or ms < 0:
            raise BadAnswer("generate_ms is not a number")
        return answer

    def timed_generate(self, seed: int) -> tuple[Scenario, float]:
        if not self._bundled:
            answer = self.generated(seed)
            return scenario_from(answer.get("scenario")), float(answer["generate_ms"])
        answer = self._ahead.pop(seed, None)
        if answer is None:
            answer = self._ask_ahead(seed)
        if "error" in answer:
            raise _named(answer["error"]["type"], answer["error"]["message"])
        ms = answer.get("generate_ms")
        if type(ms) not in (int, float) or ms < 0:
            raise BadAnswer("generate_ms is not a number")
        scenario = scenario_from(answer.get("scenario"))
        if "describe" in answer and self._facts is None:
            self._facts = _facts(answer["describe"])
        self._early = {}  # the survey asks about one seed at a time
        for (name, *rest), part in zip(_questions(scenario, seed, seed in self._world), answer.get("answers", [])):
            self._early.setdefault((name, *rest), []).append(_part(part))
        return scenario, float(ms)

    def _ask_ahead(self, seed: int) -> dict[str, Any]:
        """env_seed on ``seed`` and the survey's next seeds (as many as its process answers within
        :data:`AHEAD_S`): this seed's answer; the others' are kept for their turn."""
        later = self._order[self._order.index(seed) + 1:] if seed in self._order else []
        asked = [seed, *[s for s in later if s not in self._ahead]]
        try:
            answers = _object(call("env_seed", {"seeds": asked, "world": [s for s in asked if s in self._world],
                                                "describe": self._facts is None, "ahead_s": AHEAD_S}), "env_seed")
        except RuntimeError as exc:  # a reply that was not JSON or too long: generate alone says what
            if type(exc).__name__ != "SerializationError":
                raise
            answer = self.generated(seed)
            return {"scenario": answer.get("scenario"), "generate_ms": answer["generate_ms"]}
        rows = answers.get("seeds")
        if type(rows) is not list or not rows or not all(type(r) is dict and r.get("seed") in asked for r in rows):
            raise BadAnswer("env_seed did not answer the seeds asked")
        for row in rows[1:]:
            self._ahead[row["seed"]] = row
        if rows[0]["seed"] != seed:
            raise BadAnswer("env_seed did not answer the first seed asked first")
        return rows[0]

    def generate(self, seed: int) -> Scenario:
        return self.timed_generate(seed)[0]

    def _solution(self, scenario: Scenario, which: str) -> list[Any]:
        turns = self._answered(which, _text(scenario.to_dict()))
        if turns is _ASK:
            turns = call("env_solution", {"scenario": scenario.to_dict(), "which": which})
        if type(turns) is not list:
            raise BadAnswer("a solution is not a list of turns")
        return turns

    def reference_solution(self, scenario: Scenario) -> list[Any]:
        return self._solution(scenario, "reference")

    def capability_skipping_solution(self, scenario: Scenario) -> list[Any]:
        return self._solution(scenario, "skipping")

    def initial_state(self, scenario: Scenario) -> Any:
        found = self._answered("initial_state", _text(scenario.to_dict()))
        return call("env_initial_state", {"scenario": scenario.to_dict()}) if found is _ASK else found

    def derive_truth(self, scenario: Scenario, state: Any) -> Any:
        found = self._answered("derive_truth", _text(scenario.to_dict()), _text(state))
        return call("env_derive_truth", {"scenario": scenario.to_dict(), "state": state}) if found is _ASK else found

    def derive_truths(self, scenario: Scenario, states: list[Any]) -> list[dict[str, Any]]:
        """``derive_truth`` per state (see :func:`derive_each`), batched into few one-shot processes; where a
        batch's process fails as a whole (env code that ends it), its states are asked one process each."""
        answers: list[dict[str, Any]] = []
        for batch in _batches(states):
            try:
                answers += _checked(call("env_derive_truths", {"scenario": scenario.to_dict(), "states": batch}), batch)
            except Exception:  # noqa: BLE001 - a bad or failed batch: each asked alone, as before batching
                answers += [_one(lambda s=s: self.derive_truth(scenario, s)) for s in batch]
        return answers

    def truth_marks(self, seed: int) -> dict[str, Any]:
        found = self._answered("truth_marks", str(seed))
        return _object(call("env_truth_marks", {"seed": seed}) if found is _ASK else found, "the truth marks")


class RemoteDriver:
    """The gate's episodes, each in a fresh process of its own that sees exactly what training sends it:
    ``reset``, ``step``, ``truncate``. What the gate reads of the episode afterwards (state, transcript, tool
    log) comes from a ``record`` call once the episode has ended and been scored; the process then ends.
    ``scenario_of(seed)``: the probe process's copy of a seed's scenario (itself asked of a fresh process)."""

    def __init__(self, scenario_of: Callable[[int], Scenario]) -> None:
        self._scenario_of = scenario_of
        self._record: dict[str, Any] | None = None
        self._episode: Episode | None = None
        self._seed = 0

    def reset(self, seed: int) -> dict[str, Any]:
        self._record, self._episode, self._seed = None, None, seed
        return call("reset", {"seed": seed})

    def scenario(self, seed: int) -> Scenario:
        return self._scenario_of(seed)

    def step(self, action: Any) -> dict[str, Any]:
        return call("step", {"action": action})

    def finish(self) -> dict[str, Any]:
        return call("truncate", {})["info"]["reward_detail"]

    def _recorded(self) -> dict[str, Any]:
        if self._record is None:
            self._record = call("record", {"with_scenario": False})
        return self._record

    def episode(self) -> Episode:
        if self._episode is None:
            data = self._recorded()
            self._episode = Episode(
                scenario=_Generated(self._seed, self._scenario_of), state=data["state"], messages=data["messages"],
                tool_log=[ToolRecord(**r) for r in data["tool_log"]], steps=data["steps"],
                user_turns=data["user_turns"], ended_by=data["ended_by"])
        return self._episode

    def env_errors(self) -> list[dict[str, str]]:
        return list(self._recorded()["env_errors"])

    def timings(self) -> tuple[float, list[float]]:
        """The reset's and the steps' ms as the episode process timed them (its start not included)."""
        data = self._recorded()
        return float(data["reset_ms"]), [float(ms) for ms in data["step_ms"]]


class _Generated:
    """An episode's scenario, asked for only if something reads it: the gate's probes read an episode's state,
    transcript and tool log, so ``record`` leaves the scenario out (as much JSON as the state)."""

    def __init__(self, seed: int, scenario_of: Callable[[int], Scenario]) -> None:
        self._seed, self._scenario_of, self._made = seed, scenario_of, None

    def __getattr__(self, name: str) -> Any:
        if self._made is None:
            self._made = self._scenario_of(self._seed)
        return getattr(self._made, name)


def _one(truth_of: Callable[[], Any]) -> dict[str, Any]:
    try:
        return {"truth": truth_of()}
    except Exception as exc:  # noqa: BLE001 - env code
        return {"error": type(exc).__name__}


def derive_each(env_of: Callable[[], Any], scenario_of: Callable[[], Scenario],
                states: list[Any]) -> list[dict[str, Any]]:
    """``{"truth": ...}`` or ``{"error": TypeName}`` per state, each from ``env_of()`` (a fresh env where it makes
    one) on ``scenario_of()`` and its own copy of the state (what one question in a process of its own would see)."""
    return [_one(lambda s=s: env_of().derive_truth(scenario_of(), json.loads(json.dumps(s)))) for s in states]


def truths(env: Any, scenario: Scenario, states: list[Any]) -> list[dict[str, Any]]:
    """The batched ``derive_truth`` of either env kind: :class:`RemoteEnv` asks few processes; any other (the
    in-process path, a plain TaskEnv) asks it in a loop."""
    if isinstance(env, RemoteEnv):
        return env.derive_truths(scenario, states)
    return derive_each(lambda: env, lambda: scenario, states)


def _batches(states: list[Any]) -> list[list[Any]]:
    out: list[list[Any]] = [[]]
    size = 0
    for state in states:
        chars = len(json.dumps(state))
        if out[-1] and size + chars > BATCH_CHARS:
            out.append([])
            size = 0
        out[-1].append(state)
        size += chars
    return [batch for batch in out if batch]


def _checked(answers: Any, batch: list[Any]) -> list[dict[str, Any]]:
    if type(answers) is not list or len(answers) != len(batch):
        raise BadAnswer("derive_truths did not answer one item per state")
    for answer in answers:
        if type(answer) is not dict or not (set(answer) == {"truth"} or (set(answer) == {"error"}
                                                                         and type(answer["error"]) is str)):
            raise BadAnswer('a derive_truths item is not {"truth": ...} or {"error": name}')
    return answers



_ASK = object()  # no answer in advance: the question goes to a one-shot process of its own


def _facts(facts: Any) -> dict[str, Any]:
    facts = _object(facts, "describe")
    if not isinstance(facts.get("target"), str) or not isinstance(facts.get("write_tools"), list):
        raise BadAnswer("describe has no target or write_tools")
    return facts


def _text(value: Any) -> str:
    return json.dumps(value, default=str)  # key order kept: a question in another order is another question


def _questions(scenario: Scenario, seed: int, world: bool) -> list[tuple[str, ...]]:
    """What ``env_seed`` answers, in its answer's order, as the probe process asks it: both solutions; on a world
    seed the initial state, derive_truth of the start state as is and in canonical key order (truth_check and the
    hidden-threshold probe), and the truth marks."""
    text = _text(scenario.to_dict())
    asked: list[tuple[str, ...]] = [("reference", text), ("skipping", text)]
    if world:
        canonical = json.loads(json.dumps(scenario.state, sort_keys=True))
        asked += [("initial_state", text), ("derive_truth", text, _text(scenario.state)),
                  ("derive_truth", text, _text(canonical)), ("truth_marks", str(seed))]
    return asked


def seed_answers(params: dict[str, Any], fresh_env: Callable[[], Any], timed: Callable[[int], tuple[Scenario, float]],
                 solve: Callable[[Scenario, str], list[Any]], describe: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The one-shot ``env_seed``: :func:`seed_answer` for each of ``seeds`` in order, the first always, the next
    while ``ahead_s`` has not passed and the answers' JSON stays under :data:`BATCH_CHARS`; a seed whose
    generate raised is ``{"seed", "error"}``. ``describe``: the env's description comes with the first."""
    started, rows, chars = time.perf_counter(), [], 0
    world = frozenset(int(s) for s in params.get("world") or [])
    for seed in [int(s) for s in params["seeds"]]:
        if rows and (time.perf_counter() - started > float(params.get("ahead_s", 0.0)) or chars > BATCH_CHARS):
            break
        try:
            row = {"seed": seed, **seed_answer(seed, seed in world, fresh_env, timed, solve)}
        except BaseException as exc:  # noqa: BLE001 - env code's generate: this seed's answer, as its own
            row = {"seed": seed, "error": _error(exc)}
        if params.get("describe") and not rows:
            row["describe"] = describe()
        try:
            chars += len(json.dumps(row))
        except (TypeError, ValueError, RecursionError):
            chars = BATCH_CHARS + 1  # no JSON: the reply says so, and env_generate then says what
        rows.append(row)
    return {"seeds": rows}


def seed_answer(seed: int, world: bool, fresh_env: Callable[[], Any], timed: Callable[[int], tuple[Scenario, float]],
                solve: Callable[[Scenario, str], list[Any]]) -> dict[str, Any]:
    """``timed(seed)`` (a fresh env's generate and its ms), then an answer to each of :func:`_questions`
    (``{"value": ...}`` or the error it raised, ``{"error": {"type", "message"}}``), each on a fresh env with its
    own copy of the scenario and state from their JSON, as a one-shot process of its own would see them. A
    scenario that is not JSON gets no answers (the reply says why)."""
    scenario, generate_ms = timed(seed)
    data = scenario.to_dict()
    out: dict[str, Any] = {"scenario": data, "generate_ms": generate_ms, "answers": []}
    try:
        text = json.dumps(data)
    except (TypeError, ValueError, RecursionError):
        return out

    def copy() -> Scenario:
        return Scenario(**json.loads(text))

    def ask(name: str, *rest: str) -> Any:
        if name in ("reference", "skipping"):
            return solve(copy(), name)
        if name == "initial_state":
            return fresh_env().initial_state(copy())
        if name == "derive_truth":
            return fresh_env().derive_truth(copy(), json.loads(rest[1]))
        from trace_env import gate_world  # here: gate_world's importers import this module

        return gate_world.truth_marks(fresh_env(), seed)

    for name, *rest in _questions(copy(), seed, world):
        try:
            value = ask(name, *rest)
        except BaseException as exc:  # noqa: BLE001 - env code (SystemExit too): this question's answer, as its own
            out["answers"].append({"error": _error(exc)})
            continue
        try:
            json.dumps(value)
        except (TypeError, ValueError, RecursionError) as exc:  # no JSON: what its own reply would have said
            out["answers"].append({"error": _error(exc, "SerializationError")})
            continue
        out["answers"].append({"value": value})
    return out


def _error(exc: BaseException, kind: str | None = None) -> dict[str, str]:
    try:
        message = str(exc)
    except BaseException as e:  # noqa: BLE001 - an exception whose __str__ raises
        message = f"<unprintable exception: {type(e).__name__}>"
    return {"type": kind or type(exc).__name__, "message": message[:2000]}


def _part(part: Any) -> dict[str, Any]:
    if type(part) is dict and set(part) == {"value"}:
        return part
    error = part.get("error") if type(part) is dict and set(part) == {"error"} else None
    if type(error) is dict and set(error) == {"type", "message"} and all(type(v) is str for v in error.values()):
        return part
    raise BadAnswer('an answer of env_seed is not {"value": ...} or {"error": {"type", "message"}}')
