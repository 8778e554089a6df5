"""Hypothesis search over agent actions for the checks that fuzz (robustness, reward bounds), and the
minimising of what it finds."""

from __future__ import annotations

from typing import Any, Callable

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

from factory.validation.checks.context import CheckContext


def hypothesis_settings(ctx: CheckContext, examples: int | None = None) -> settings:
    return settings(
        max_examples=examples or ctx.config.fuzz_examples,
        deadline=None,
        database=None,
        derandomize=True,  # the same seeds and env get the same examples: the run seed repeats a run
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )


def draw(ctx: CheckContext, strategy: st.SearchStrategy[Any], examples: int | None = None) -> list[Any]:
    """The examples Hypothesis generates for ``strategy``, in order: the same ones a search that never fails
    would try (derandomized, generate phase only), drawn up front so they can be played in batches."""
    cases: list[Any] = []

    def collect(value: Any) -> bool:
        cases.append(value)
        return False

    try:
        find(strategy, collect, settings=hypothesis_settings(ctx, examples))
    except (NoSuchExample, Unsatisfiable):
        pass
    return cases


def search(ctx: CheckContext, strategy: st.SearchStrategy[tuple[int, list[Any]]], play: Callable[[list[Any]], list[Any]],
           fails: Callable[[Any], bool], examples: int | None = None) -> tuple[int, list[Any]] | None:
    """The first ``(seed, turns)`` Hypothesis generates that fails, minimised; None when none fails.

    The examples are drawn first and played in batches spread over the lanes (``play`` returns one result
    per case, ``fails`` judges one): the first failing one in Hypothesis' order is the one a one-by-one
    search would have found, on any number of lanes. Hypothesis searches; the minimising is ours
    (:func:`minimise`): its shrinker replays thousands of nested action sequences on the host, tens of
    seconds where dropping turns and calls one at a time finds the same short counterexample in a few
    episodes. A slow, hung or dead worker ends the search (BudgetExceeded or a worker failure is raised).
    """
    cases = draw(ctx, strategy, examples)
    for start in range(0, len(cases), 32):  # a failure early in the list stops the rest
        chunk = cases[start:start + 32]
        for case, result in zip(chunk, play(chunk)):
            if fails(result):
                return minimise(case, lambda c: fails(play([c])[0]))
    return None


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
