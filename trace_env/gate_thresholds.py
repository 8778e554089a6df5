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
    """``undeclared`` (no derive_truth), ``none``, or the first numeric boundary the agent was never shown."""
    state = json.loads(canonical_json(scenario.state))  # a private copy, changed in place and restored
    truth_of = lambda: env.derive_truth(scenario, state)  # noqa: E731
    try:
        base = truth_of()
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
    leaves = shown_leaves[:MAX_LEAVES]
    for path, value in leaves:
        integer = isinstance(_get(state, path), int)
        for factor in FACTORS:
            moved = round(value * factor) if integer else value * factor
            if moved == value or _decision(_at(truth_of, state, path, moved, value, integer)) == decided:
                continue
            inside, outside = value, moved  # bisect: inside keeps the decision, outside changes it
            for _ in range(BISECTIONS):
                middle = round((inside + outside) / 2) if integer else (inside + outside) / 2
                if middle in (inside, outside):
                    break
                if _decision(_at(truth_of, state, path, middle, value, integer)) == decided:
                    inside = middle
                else:
                    outside = middle
            amounts = {inside, outside, *_numbers(_at(truth_of, state, path, inside, value, integer)),
                       *_numbers(_at(truth_of, state, path, outside, value, integer))}
            if not any(_near(q, s) for q in amounts for s in said):
                where = ".".join(str(k) for k in path)
                return (f"the decision changes when state.{where} goes from {inside:g} to {outside:g} (it is {value:g}), "
                        "and no number the agent is shown marks that boundary")
            break
    return "none"


def _get(state: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        state = state[key]
    return state


def _at(truth_of: Any, state: Any, path: tuple[Any, ...], value: float, original: float, integer: bool) -> Any:
    """The truth with one leaf moved (restored afterwards); an error counts as its own decision."""
    _set(state, path, int(value) if integer else value)
    try:
        return truth_of()
    except Exception as exc:  # noqa: BLE001 - env code
        return {"error": type(exc).__name__}
    finally:
        _set(state, path, int(original) if integer else original)


def _numbers(value: Any) -> list[float]:
    return [float(v) for _, v in _leaves(value)]
