"""Hypothesis search over agent actions for the checks that fuzz (robustness, reward bounds), and the
minimising of what it finds."""

from __future__ import annotations

from typing import Any, Callable

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

from factory.validation.checks.context import WORKER_FAILURES, BudgetExceeded, CheckContext


def hypothesis_settings(ctx: CheckContext, examples: int | None = None) -> settings:
    return settings(
        max_examples=examples or ctx.config.fuzz_examples,
        deadline=None,
        database=None,
        derandomize=True,  # the same seeds and env get the same examples: the run seed repeats a run
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )


def search(ctx: CheckContext, strategy: st.SearchStrategy[tuple[int, list[Any]]], is_failure: Callable[[Any], bool],
           examples: int | None = None) -> Any | None:
    """The first ``(seed, turns)`` Hypothesis generates that fails, minimised; None when none fails.

    Hypothesis searches; the minimising is ours (:func:`minimise`): its shrinker replays thousands of
    nested action sequences on the host, tens of seconds where dropping turns and calls one at a time
    finds the same short counterexample in a few episodes. A slow, hung or dead worker ends the search
    at once (it must not be replayed) and is raised when Hypothesis is done.
    """
    stopped: list[BaseException] = []

    def condition(value: Any) -> bool:
        if stopped:
            return False
        try:
            return bool(is_failure(value))
        except (BudgetExceeded, WORKER_FAILURES) as exc:
            stopped.append(exc)
            return False

    try:
        found = find(strategy, condition, settings=hypothesis_settings(ctx, examples))
    except (NoSuchExample, Unsatisfiable):
        found = None
    if stopped:
        raise stopped[0]
    return None if found is None else minimise(found, is_failure)


def minimise(case: tuple[int, list[Any]], is_failure: Callable[[Any], bool], budget: int = 40) -> tuple[int, list[Any]]:
    """Drop turns, then calls, one at a time while the case still fails (at most ``budget`` episodes)."""
    seed, turns = case[0], list(case[1])
    tries = 0
    index = len(turns) - 1
    while index >= 0 and tries < budget:
        candidate = turns[:index] + turns[index + 1:]
        tries += 1
        if candidate and is_failure((seed, candidate)):
            turns = candidate
        index -= 1
    for index, turn in enumerate(list(turns)):
        calls = turn.get("calls") if isinstance(turn, dict) else None
        while isinstance(calls, list) and len(calls) > 1 and tries < budget:
            candidate = turns[:index] + [{**turn, "calls": calls[1:]}] + turns[index + 1:]
            tries += 1
            if not is_failure((seed, candidate)):
                break
            turns, turn, calls = candidate, candidate[index], calls[1:]
    return seed, turns
