"""Seeded stochastic policies between the reference and the capability-skipping agent, and mutants of the
reference solution.

The GRPO-signal check needs groups of K rollouts that differ the way a learning policy's samples do. A
mixture policy follows the reference, the skipping agent, replays one of their calls out of order, or
makes one of their calls with a wrong but real value (a template resolved in the sandbox to another value
of the scenario with the same shape), with per-rollout mixing weights; it is driven by
``random.Random(seed)`` so groups replay exactly.

The reward-sensitivity check asks whether the reward depends on what the agent does at all: it plays the
reference with one call dropped, with one key argument corrupted, and with every turn replaced by a
filler call that does nothing (a call to a tool that does not exist: an error observation, and the
episode goes on), and expects the reward to fall.
"""

from __future__ import annotations

import copy
import random
from typing import Any

FILLER_TEXTS = ("Let me check that for you.", "Is there anything else I should know?", "One moment please.")
FILLER_TOOL = "gate_filler_noop"
FILLER_TURN = {"content": None, "calls": [{"name": FILLER_TOOL, "arguments": {}}]}
FILLER_TOOLS = (FILLER_TOOL, "noop_check", "lookup_nothing", "gate_placeholder")


def filler_turn(rng: random.Random | None = None) -> dict[str, Any]:
    """A call to a tool that does not exist (an error observation; the episode goes on), its name drawn from
    ``rng`` so an env cannot recognise the probe by name."""
    return {"content": None, "calls": [{"name": rng.choice(FILLER_TOOLS) if rng else FILLER_TOOL, "arguments": {}}]}


def _calls(turn: Any) -> list[dict[str, Any]]:
    calls = turn.get("calls") if isinstance(turn, dict) else None
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _key_rank(key: str, value: Any) -> int:
    """Which argument decides what a call does: ids first, then amounts and times, short codes, flags;
    free text last (a reward may rightly match it loosely)."""
    if isinstance(value, str) and value and ("id" in key.lower().split("_") or (any(c.isdigit() for c in value) and " " not in value)):
        return 0
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return 1
    if isinstance(value, str) and value and " " not in value:
        return 2
    if isinstance(value, bool):
        return 3
    return 4 if isinstance(value, str) and value else 9


def corrupt_call(call: dict[str, Any], salt: int) -> dict[str, Any] | None:
    """The call with its key argument replaced by another value of the scenario with the same shape (or,
    failing that, the same value changed in one character); None when the call has no such argument."""
    arguments = call.get("arguments")
    if not isinstance(arguments, dict) or not arguments:
        return None
    key = min(arguments, key=lambda k: _key_rank(str(k), arguments[k]))
    if _key_rank(str(key), arguments[key]) == 9:
        return None
    return {**call, "arguments": {**arguments, key: {"$pool": salt, "like": arguments[key]}}}


def mixture_rollout(reference: list[Any], skipping: list[Any], rng: random.Random, max_turns: int = 16) -> list[Any]:
    p_reference = rng.random()
    p_skip = rng.random() * (1.0 - p_reference)
    pool = [turn for turn in reference + skipping if _calls(turn)]
    out: list[Any] = []
    ref_i = skip_i = 0
    while len(out) < max_turns and (ref_i < len(reference) or skip_i < len(skipping)):
        roll = rng.random()
        if roll < p_reference and ref_i < len(reference):
            out.append(reference[ref_i])
            ref_i += 1
        elif roll < p_reference + p_skip and skip_i < len(skipping):
            out.append(skipping[skip_i])
            skip_i += 1
        elif pool and rng.random() < 0.8:
            turn = rng.choice(pool)
            call = rng.choice(_calls(turn))
            wrong = corrupt_call(call, rng.randrange(400)) if rng.random() < 0.5 else None
            out.append({"content": None, "calls": [wrong or call]})
            ref_i += rng.random() < 0.5
        else:
            out.append({"content": rng.choice(FILLER_TEXTS), "calls": []})
            ref_i += 1
    return out


def reference_mutants(reference: list[Any], write_tools: set[str], max_each: int = 3) -> list[tuple[str, list[Any]]]:
    """(kind, turns) for the mutants of one reference: ``filler`` (every turn a no-op call), ``drop`` (one
    write call left out) and ``corrupt`` (one key argument of a write call replaced by another real value).
    Only write calls are dropped or corrupted: a reward may rightly grade the outcome alone, and then a read
    the reference did not need does not matter; the state changes it asks for always should."""
    positions = [(t, c) for t, turn in enumerate(reference) for c, call in enumerate(_calls(turn)) if call.get("name") in write_tools]
    positions.reverse()
    mutants: list[tuple[str, list[Any]]] = [("filler", [copy.deepcopy(FILLER_TURN) for _ in reference])]
    for t, c in positions[:max_each]:
        turns = copy.deepcopy(reference)
        del turns[t]["calls"][c]
        if not turns[t]["calls"] and not turns[t].get("content"):
            del turns[t]
        mutants.append(("drop", turns))
    for salt, (t, c) in enumerate(positions[:max_each]):
        wrong = corrupt_call(_calls(reference[t])[c], salt)
        if wrong is not None:
            turns = copy.deepcopy(reference)
            turns[t]["calls"][c] = wrong
            mutants.append(("corrupt", turns))
    return mutants


#: What an LLM agent says before it acts, and beside a call (drawn per seed, so an env cannot match one text).
AGENT_OPENINGS = ("Could you confirm what you would like me to do?", "Before I go ahead, can you confirm the details?",
                  "Happy to help. Could you tell me a bit more about your request?")
AGENT_ASIDES = ("Let me take care of that.", "I'll do that now.", "One moment while I handle this.")


def as_an_agent(turns: list[Any], rng: random.Random) -> list[Any]:
    """The same turns as an LLM agent plays them: a question to the user first, and a sentence beside each bare
    call. An agent in training has to ask for what a scripted solution reads from the scenario, and writes text
    beside its calls; a reward that pays the capability-skipping agent only when it does so is lenient to every
    skipping agent but the env's own script."""
    out: list[Any] = [{"content": rng.choice(AGENT_OPENINGS), "calls": []}]
    for turn in turns:
        turn = copy.deepcopy(turn)
        if isinstance(turn, dict) and _calls(turn) and not turn.get("content"):
            turn["content"] = rng.choice(AGENT_ASIDES)
        out.append(turn)
    return out
