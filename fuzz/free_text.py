"""Free-text arguments that carry a decision (a transfer summary, a note): which of their words carry it, and a
mutant that changes only those.

A key-argument mutant that changes any character of free text may change a courtesy word ("Thanks" ->
"Thankt"); a reward that rightly ignores courtesy does not fall, and a good env is refused. The words that carry
the decision are those the reference varies across seeds in that argument (plain lower-case words, not ids, names or
numbers): "is eligible" on one seed and "is not eligible" on another. The mutant takes, from the reference's value on
the seed that differs most in such words, only those words (this seed's ids, names and amounts kept); an argument
whose plain words never vary carries no decision, and no mutant is made of it.
"""

from __future__ import annotations

import difflib
import re
from collections import defaultdict
from typing import Any

from fuzz.turns import calls_of

Turns = list[Any]
_WORD = re.compile(r"(?<![\w$#@.-])[a-z][a-z']*(?![\w@#-])")


def is_free_text(value: Any) -> bool:
    return isinstance(value, str) and " " in value.strip()


def words_of(text: str) -> set[str]:
    return set(_WORD.findall(text))


def argument_texts(references: list[Turns], write_tools: set[str]) -> dict[tuple[str, str], list[str]]:
    """(tool, argument) -> the free-text values the references give it, one entry per value, in seed order."""
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for turns in references:
        for turn in turns:
            for call in calls_of(turn):
                arguments = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
                if call.get("name") in write_tools:
                    for key, value in arguments.items():
                        if is_free_text(value):
                            out[(str(call.get("name")), str(key))].append(value)
    return out


def _word(token: str) -> bool:
    """A plain lower-case word (punctuation around it allowed): not an id, a name, a number or an amount."""
    core = token.strip(".,;:!?()\"'")
    return bool(core) and bool(_WORD.fullmatch(core))


def toward(text: str, other: str) -> tuple[str, int] | None:
    """``text`` with the plain words in which ``other`` differs from it taken from ``other`` (ids, names, numbers
    and unchanged words kept), and how many words changed; None when no plain word differs."""
    mine, theirs = text.split(" "), other.split(" ")
    out: list[str] = []
    changed = 0
    def keys(tokens: list[str]) -> list[str]:  # ids, names and numbers align with each other, never with words
        return [t.strip(".,;:!?()\"'") if _word(t) else "\x00" for t in tokens]

    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=keys(mine), b=keys(theirs), autojunk=False).get_opcodes():
        old, new = mine[i1:i2], theirs[j1:j2]
        if tag != "equal" and all(_word(t) for t in old + new):
            out.extend(new)
            changed += max(len(old), len(new))
        else:
            out.extend(old)
    return (" ".join(out), changed) if changed else None


def swapped(text: str, others: list[str]) -> str | None:
    """The rewording of ``text`` toward the reference's value on another seed that changes the most plain words
    (the decision words: "is eligible ... business" -> "is not eligible ... flown"); None where no other seed's
    value differs from it in plain words (the argument carries no decision, only courtesy and ids)."""
    best: tuple[int, str] | None = None
    for other in others:
        moved = toward(text, other) if other != text else None
        if moved is not None and (best is None or moved[1] > best[0]):
            best = (moved[1], moved[0])
    return best[1] if best else None


def decision_mutant(turns: Turns, texts: dict[tuple[str, str], list[str]]) -> Turns | None:
    """A corrupted mutant whose corruption is a template over free text, made concrete: only the words that carry
    the decision changed. None when that argument carries none (the mutant would only change courtesy)."""
    for turn in turns:
        for call in calls_of(turn):
            arguments = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
            for key, value in arguments.items():
                if isinstance(value, dict) and "$pool" in value and is_free_text(value.get("like")):
                    new = swapped(str(value["like"]), texts.get((str(call.get("name")), str(key)), []))
                    if new is None:
                        return None
                    arguments[key] = new
                    return turns
    return turns
