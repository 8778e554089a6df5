"""Inside the sandbox: does the truth follow a numeric rule the agent is never told? (a hidden threshold)

Where the env declares ``derive_truth``, the gate can ask it counterfactual questions. Each number of the state
that the agent reads (it appears in the tool results and user replies of the reference episode) is scaled
(x0.5, x0.8, x1.25, x2; shown under its own key first, at most 24) and the truth recomputed; where the decision (the truth with its numbers left out)
changes, the boundary is found by bisection. A rule the agent can apply names its boundary: the boundary value,
or an amount of the truth at it, must be a number the agent was shown (system prompt, first message, what the
reference read). "Refunds over 900 are refused", never said, fails: the right answer loses wherever it bites.

Rules over dates written as text are not probed (numbers only), nor thresholds derived from shown numbers by
arithmetic other than equality (a boundary at "twice the balance"). Stdlib only: this runs next to env code.
"""

from __future__ import annotations

import json
import re
from typing import Any

from trace_env import gate_remote
from trace_env.sdk import Scenario, TaskEnv, canonical_json, numbers_in

FACTORS = (0.5, 0.8, 1.25, 2.0)
_PAIR = re.compile(r'"([^"]{1,40})":\s*(-?\d+(?:\.\d+)?)')
MAX_LEAVES = 24
BISECTIONS = 16


def _decision(truth: Any) -> str:
    """The truth with every number blanked: what changes when the decision changes, not when an amount does."""
    def blank(value: Any) -> Any:
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return value
        if isinstance(value, (int, float)):
            return 0
        if isinstance(value, dict):
            return {str(k): blank(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [blank(v) for v in value]
        return str(value)
    return canonical_json(blank(truth))


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], float]]:
    out: list[tuple[tuple[Any, ...], float]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            out += _leaves(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _leaves(item, path + (i,))
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0:
        out.append((path, float(value)))
    return out


def _set(state: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        state = state[key]
    state[path[-1]] = value


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= 0.01 + 1e-3 * abs(b)


def hidden_threshold(env: TaskEnv, scenario: Scenario, shown: str) -> str:
    """``undeclared`` (no derive_truth), ``none``, or the first numeric boundary the agent was never shown.

    Independent questions are asked together (``gate_remote.truths``: one one-shot process per batch under the
    shim): every (leaf, factor) move at once, then every changing leaf's bisection in lockstep, one batch per step,
    with the amounts at a boundary asked in the batch after its bisection ends. The finding is the one asking
    one question at a time gave: the first in leaf order (a leaf's first changing factor), returned as soon as
    every leaf before it has none; leaves after a finding are no longer asked about."""
    state = json.loads(canonical_json(scenario.state))  # a private copy; each question gets a copy of its own
    try:
        base = env.derive_truth(scenario, state)
    except Exception:  # noqa: BLE001 - env code; the stale-truth check reports derive_truth's errors
        return "none"
    if base is None:
        return "undeclared"
    decided = _decision(base)
    said = numbers_in(shown)
    pairs = {(key, float(number)) for key, number in _PAIR.findall(shown)}
    shown_leaves = [(p, v) for p, v in _leaves(state) if any(_near(v, s) for s in said)]
    # Shown under their own key first ("amount": 694 in a tool result), then any leaf whose value was said.
    shown_leaves.sort(key=lambda leaf: (str(leaf[0][-1]), leaf[1]) not in pairs)
    leaves = [(path, value, isinstance(_get(state, path), int)) for path, value in shown_leaves[:MAX_LEAVES]]
    moves = [(i, (round(value * factor) if integer else value * factor))
             for i, (path, value, integer) in enumerate(leaves) for factor in FACTORS]
    moves = [(i, moved) for i, moved in moves if moved != leaves[i][1]]
    answers = _ask(env, scenario, state, leaves, moves)
    changing: dict[int, float] = {}  # a leaf's first move (in factor order) that changes the decision
    for (i, moved), answer in zip(moves, answers):
        if i not in changing and _decision(answer) != decided:
            changing[i] = moved
    bounds = {i: [leaves[i][1], moved] for i, moved in changing.items()}  # inside keeps the decision, outside not
    steps = dict.fromkeys(bounds, 0)  # bisection steps asked per leaf
    ended: set[int] = set()  # leaves whose bisection has ended
    found: dict[int, str] = {}  # per leaf whose boundary has been checked: its finding, "" for none
    while True:
        first = min((i for i, finding in found.items() if finding), default=len(leaves))  # later leaves: moot
        questions: list[tuple[int, float]] = []
        ends: list[int] = []  # leaves whose boundary is asked about in this batch (two questions each, last)
        for i in sorted(bounds):
            inside, outside = bounds[i]
            if i > first or i in found:
                continue
            middle = round((inside + outside) / 2) if leaves[i][2] else (inside + outside) / 2
            if steps[i] == BISECTIONS or middle in (inside, outside):
                ended.add(i)
            if i in ended:
                ends.append(i)
            else:
                questions.append((i, middle))
        for i in sorted(bounds):  # the first finding in leaf order, once every leaf before it has none
            if i not in found:
                break
            if found[i]:
                return found[i]
        if not questions and not ends:
            return "none"
        asked = questions + [(i, at) for i in ends for at in bounds[i]]
        answers = _ask(env, scenario, state, leaves, asked)
        for (i, middle), answer in zip(questions, answers):
            bounds[i][_decision(answer) != decided] = middle
            steps[i] += 1
        for n, i in enumerate(ends):
            at = len(questions) + 2 * n
            found[i] = _finding(leaves[i], bounds[i], answers[at], answers[at + 1], said)


def _finding(leaf: tuple[tuple[Any, ...], float, bool], bound: list[float], at_inside: Any, at_outside: Any,
             said: list[float]) -> str:
    """The boundary's finding ("" where a number the agent was shown marks it)."""
    (path, value, _integer), (inside, outside) = leaf, bound
    amounts = {inside, outside, *_numbers(at_inside), *_numbers(at_outside)}
    if any(_near(q, s) for q in amounts for s in said):
        return ""
    where = ".".join(str(k) for k in path)
    return (f"the decision changes when state.{where} goes from {inside:g} to {outside:g} (it is {value:g}), "
            "and no number the agent is shown marks that boundary")


def _get(state: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        state = state[key]
    return state


def _ask(env: TaskEnv, scenario: Scenario, state: Any, leaves: list[tuple[tuple[Any, ...], float, bool]],
         moves: list[tuple[int, float]]) -> list[Any]:
    """The truth with one leaf moved, per move (leaf index, value), each on a copy of the state; an error counts
    as its own decision (``{"error": TypeName}``)."""
    states = []
    for i, value in moves:
        path, _value, integer = leaves[i]
        moved = json.loads(canonical_json(state))
        _set(moved, path, int(value) if integer else value)
        states.append(moved)
    return [answer.get("truth") if "truth" in answer else {"error": answer["error"]}
            for answer in gate_remote.truths(env, scenario, states)] if states else []


def _numbers(value: Any) -> list[float]:
    return [float(v) for _, v in _leaves(value)]
