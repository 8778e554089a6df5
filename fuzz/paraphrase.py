"""Rewordings of the reference that keep its meaning, for the ``paraphrase`` check.

A reward must pay the right behaviour however it is worded: an agent that writes "can't" for "cannot",
"canceled" for "cancelled", "$1204.50" for "$1,204.50", adds a courteous sentence, or reads two records in
the other order has done the same thing. Each variant changes one kind of thing, so a failure names it.
The wording of the added sentences comes from the run's ``rng``.
"""

from __future__ import annotations

import copy
import random
import re
from typing import Any, Callable

Turns = list[Any]

CONTRACTIONS = [("cannot", "can't"), ("do not", "don't"), ("does not", "doesn't"), ("is not", "isn't"), ("will not", "won't"),
                ("I am", "I'm"), ("it is", "it's"), ("you are", "you're"), ("we are", "we're"), ("I have", "I've"),
                ("there is", "there's"), ("that is", "that's")]
SPELLINGS = [("cancelled", "canceled"), ("cancelling", "canceling"), ("cancellation", "cancelation")]
_MONEY = re.compile(r"\$(\d{1,3}(?:,\d{3})+)(\.\d\d)?")
_CENTS = re.compile(r"\$(\d+)\.00\b")


def _swap(text: str, pairs: list[tuple[str, str]]) -> str:
    """Each phrase replaced by its partner (both ways, whole words, case kept for the first letter)."""
    table = {a.lower(): b for a, b in pairs} | {b.lower(): a for a, b in pairs}
    pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in sorted(table, key=len, reverse=True)) + r")\b", re.IGNORECASE)

    def replace(match: re.Match[str]) -> str:
        found, new = match.group(0), table[match.group(0).lower()]
        return new[0].upper() + new[1:] if found[0].isupper() and new[0].islower() else new

    return pattern.sub(replace, text)


def contractions(text: str, rng: random.Random) -> str:
    return _swap(text, CONTRACTIONS)


def spelling_and_formats(text: str, rng: random.Random) -> str:
    """US spellings (or British where the text is American), money without thousands separators or
    zero cents: ``$1,204.50`` -> ``$1204.50``, ``$120.00`` -> ``$120``."""
    text = _swap(text, SPELLINGS)
    text = _MONEY.sub(lambda m: "$" + m.group(1).replace(",", "") + (m.group(2) or ""), text)
    return _CENTS.sub(lambda m: f"${m.group(1)}", text)


def courtesy(text: str, rng: random.Random) -> str:
    before = rng.choice(["Thanks for your patience.", "Thank you for waiting.", "I appreciate your patience."])
    after = rng.choice(["Have a great day.", "Thanks again for reaching out.", "I hope this helps."])
    return f"{before} {text} {after}"


REWORDINGS: dict[str, Callable[[str, random.Random], str]] = {
    "contractions": contractions, "spelling_and_formats": spelling_and_formats, "courtesy": courtesy,
}


def reworded(reference: Turns, how: Callable[[str, random.Random], str], rng: random.Random) -> Turns | None:
    """The reference with every message to the user reworded; None when nothing changed."""
    turns = copy.deepcopy(reference)
    changed = False
    for turn in turns:
        if isinstance(turn, dict) and isinstance(turn.get("content"), str) and turn["content"].strip():
            new = how(turn["content"], rng)
            changed = changed or new != turn["content"]
            turn["content"] = new
    return turns if changed else None


def reads_reordered(reference: Turns, write_tools: set[str]) -> Turns | None:
    """The reference with each run of consecutive read-only call turns played in reverse order (and the
    calls of a turn of several reads reversed): reads change nothing, so their order must not matter."""
    def reads_only(turn: Any) -> bool:
        calls = turn.get("calls") if isinstance(turn, dict) else None
        return bool(calls) and not turn.get("content") and all(isinstance(c, dict) and c.get("name") not in write_tools for c in calls)

    turns = copy.deepcopy(reference)
    out: Turns = []
    run: Turns = []
    for turn in turns + [None]:
        if turn is not None and reads_only(turn):
            run.append(turn)
            continue
        if len(run) > 1 and len({repr(r) for r in run}) > 1:
            run.reverse()
        for item in run:
            if len(item["calls"]) > 1:
                item["calls"].reverse()
        out.extend(run)
        run = []
        if turn is not None:
            out.append(turn)
    return out if out != reference else None


def variants(reference: Turns, write_tools: set[str], rng: random.Random) -> list[tuple[str, Turns]]:
    """(kind, turns) for every rewording that changes something, and the reordered reads."""
    out = [(name, turns) for name, how in REWORDINGS.items() if (turns := reworded(reference, how, rng)) is not None]
    reordered = reads_reordered(reference, write_tools)
    if reordered is not None:
        out.append(("reads_reordered", reordered))
    return out
