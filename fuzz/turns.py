"""The reference's turns read as data: its calls, where they are, its last words, the answer they give turned
around, and the kind of decision it takes on a seed. Plain functions on the wire form of turns
(``{"content": ..., "calls": [...]}``), shared by the exploit library and the check that judges it."""

from __future__ import annotations

import copy
import re
from typing import Any

Turns = list[Any]


def say(text: str) -> dict[str, Any]:
    return {"content": text, "calls": []}


def calls_turn(calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"content": None, "calls": calls}


def calls_of(turn: Any) -> list[dict[str, Any]]:
    calls = turn.get("calls") if isinstance(turn, dict) else None
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def positions(reference: Turns, names: set[str] | None = None) -> list[tuple[int, int]]:
    """(turn, call) of every call (of ``names``), last first: the decisive writes tend to come last."""
    found = [(t, c) for t, turn in enumerate(reference) for c, call in enumerate(calls_of(turn))
             if names is None or call.get("name") in names]
    return found[::-1]


def without_call(reference: Turns, t: int, c: int) -> Turns:
    turns = copy.deepcopy(reference)
    del turns[t]["calls"][c]
    if not turns[t]["calls"] and not turns[t].get("content"):
        del turns[t]
    return turns


def last_say(reference: Turns) -> int | None:
    return next((i for i in range(len(reference) - 1, -1, -1) if isinstance(reference[i], dict) and reference[i].get("content")
                 and not calls_of(reference[i])), None)


NEGATIVE = [("is not", "is"), ("isn't", "is"), ("are not", "are"), ("aren't", "are"), ("cannot", "can"), ("can't", "can"),
            ("can not", "can"), ("will not", "will"), ("won't", "will"), ("does not", "does"), ("doesn't", "does"),
            ("has not", "has"), ("hasn't", "has"), ("not eligible", "eligible"), ("ineligible", "eligible"),
            ("not allowed", "allowed"), ("not able", "able"), ("unable", "able"), ("not possible", "possible"),
            ("denied", "approved"), ("no", "yes"), ("not", "")]
_VERB = re.compile(r"\b(is|are|was|were|can|will|does|did|has|have)\b", re.IGNORECASE)
_CLAUSES = re.compile(r"([.;:,!?\n])")


def _replace_all(text: str, pairs: list[tuple[str, str]]) -> str:
    pattern = re.compile(r"\b(" + "|".join(re.escape(a) for a, _ in sorted(pairs, key=lambda p: -len(p[0]))) + r")\b", re.IGNORECASE)
    table = {a.lower(): b for a, b in pairs}
    def swap(match: re.Match[str]) -> str:
        word = table[match.group(0).lower()]
        return word[:1].upper() + word[1:] if match.group(0)[:1].isupper() else word

    return re.sub(r"  +", " ", pattern.sub(swap, text))


_SENTENCES = re.compile(r"(?<=[.!?])(\s+)")
_NEGATIVE = re.compile(r"\b(" + "|".join(re.escape(a) for a, _ in NEGATIVE) + r")\b", re.IGNORECASE)
_YES = re.compile(r"\b(yes|approved)\b", re.IGNORECASE)


def flip(text: str) -> str:
    """The answer turned around. Its polarity is that of the sentence that gives it (the first with a yes, a no or
    a negation; else the first with a verb): a negative answer loses every negation ("cannot be cancelled" -> "can
    be cancelled", "not eligible" -> "eligible"); a positive one gains one per clause of that sentence ("is" ->
    "is not", "yes" -> "no"), so "Yes, it is eligible. I have not cancelled anything." becomes "No, it is not
    eligible. ..." (its courtesy, negative or not, does not make it a refusal)."""
    parts = _SENTENCES.split(text)
    index = next((i for i in range(0, len(parts), 2) if _NEGATIVE.search(parts[i]) or _YES.search(parts[i])),
                 next((i for i in range(0, len(parts), 2) if _VERB.search(parts[i])), 0))
    if _NEGATIVE.search(parts[index]):
        return _replace_all(text, NEGATIVE)
    parts[index] = _flip_sentence(parts[index])
    return "".join(parts)


def _flip_sentence(text: str) -> str:
    text = _replace_all(text, [("yes", "no"), ("approved", "denied")])
    return "".join(_VERB.sub(lambda m: m.group(0) + ("not" if m.group(0).lower() == "can" else " not"), part, count=1)
                   for part in _CLAUSES.split(text))


def decision_class(reference: Turns, write_tools: frozenset[str], terminal_tools: frozenset[str]) -> str:
    """What kind of decision the reference takes on a seed: the write and terminal tools it calls, and whether its
    last words are negative. Seeds of one class (every seed to refuse, every seed to cancel) are judged
    together: a policy that ignores the records and is paid on all of one class is paid for guessing it."""
    acts = sorted({str(c.get("name")) for turn in reference for c in calls_of(turn) if c.get("name") in write_tools | terminal_tools})
    index = last_say(reference)
    text = str(reference[index]["content"]) if index is not None else ""
    negative = re.search(r"\b(" + "|".join(re.escape(a) for a, _ in NEGATIVE) + r")\b", text, re.IGNORECASE)
    return "+".join(acts) + ("/no" if negative else "/yes" if text else "/-")
