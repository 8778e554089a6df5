"""Wording helpers shared by every world: how rewards read an agent's messages and how scenarios speak.

Rewards look for words in what the agent said; one spelling per word (``normalise``) and a few matchers keep
that reading identical across envs. Scenario text uses ``money`` and ``nice_date`` the same way everywhere.
"""

from __future__ import annotations

import datetime
import re

from trace_env import sdk

__all__ = [
    "CONFIRM_PATTERN",
    "REFUSAL_WORDS",
    "agent_turns",
    "answer_or_confirm",
    "answers_to",
    "asks_confirmation",
    "fact",
    "fuzzy",
    "has_any",
    "hits_groups",
    "money",
    "nice_date",
    "normalise",
    "overlap",
    "words",
]

#: A question asks for confirmation when it contains one of these (and a question mark).
CONFIRM_PATTERN = (
    r"\b(confirm|proceed|go ahead|shall i|should i|would you like me to|do you want me to|"
    r"is that (?:ok|okay|correct|right)|may i)\b"
)
#: Phrases of a refusal, after :func:`normalise`.
REFUSAL_WORDS = (
    "cannot", "can't", "can not", "unable to", "not able to", "not eligible", "ineligible", "isn't eligible",
    "not possible", "won't be able", "not allowed", "not permitted", "does not qualify", "doesn't qualify",
    "not qualify", "must decline", "have to decline",
)


def normalise(text: str | None) -> str:
    """Lower-case text with one spelling of the words rewards look for (quotes, cancelled, dashes, spaces)."""
    text = (text or "").lower().replace("\u2019", "'").replace("\u2018", "'")
    text = text.replace("canceled", "cancelled").replace("canceling", "cancelling")
    text = text.replace("cancelation", "cancellation").replace("\u2011", "-").replace("\u2013", "-")
    return re.sub(r"\s+", " ", text)


def has_any(text: str, phrases) -> bool:
    """Whether ``text`` contains any of ``phrases`` as whole words: "reservation id" is not found in "reservation
    idul6f", nor "insured" in "uninsured" (a phrase matched inside another word pays or triggers by accident)."""
    return any(phrase in text and re.search(r"(?<![a-z0-9])" + re.escape(phrase) + r"(?![a-z0-9])", text)
               for phrase in phrases)  # the plain substring test first: most phrases are not there at all


def hits_groups(text: str, groups) -> bool:
    """Whether ``text`` hits every group of alternatives: ``[["insurance"], ["health", "weather"]]``."""
    return all(has_any(text, group) for group in groups)


def asks_confirmation(text: str) -> bool:
    """A question that asks the user to confirm (``"Shall I proceed?"``)."""
    return "?" in text and bool(re.search(CONFIRM_PATTERN, text.lower()))


def words(text) -> list[str]:
    """Lower-case alphanumeric words of ``text``."""
    return re.sub(r"[^a-z0-9]+", " ", str(text).lower()).split()


def overlap(expected, actual) -> float:
    """Share of the expected text's words found in the actual text (how faithfully content was kept)."""
    wanted = words(expected)
    present = set(words(actual))
    return sum(word in present for word in wanted) / len(wanted) if wanted else 0.0


def fuzzy(query, value, every_word: bool = True) -> bool:
    """A forgiving string match: the query's words are prefixes of the value's words (case, punctuation
    ignored). ``every_word=False`` is satisfied by any one query word of three letters or more."""
    query_words, value_words = words(query), words(value)
    if not query_words or not value_words:
        return False
    if " ".join(query_words) in " ".join(value_words):
        return True
    hits = [any(w.startswith(q) or (len(w) >= 3 and q.startswith(w)) for w in value_words) for q in query_words]
    return all(hits) if every_word else any(hit for hit, q in zip(hits, query_words) if len(q) >= 3)


def money(value) -> str:
    """Dollars as people write them: ``1204`` -> ``$1,204``; ``12.5`` -> ``$12.50``."""
    return f"${value:,}" if isinstance(value, int) else f"${value:,.2f}"


def nice_date(iso_day: str) -> str:
    """``2024-05-07`` -> ``May 7``."""
    day = datetime.date.fromisoformat(iso_day)
    return day.strftime("%B ") + str(day.day)


def agent_turns(episode) -> list[list]:
    """``[step, normalised text, the user's reply or None]`` per agent turn; step k is the tool log's step k."""
    turns: list[list] = []
    for message in episode.messages:
        if message.get("role") == "assistant":
            turns.append([len(turns) + 1, normalise(message.get("content")), None])
        elif message.get("role") == "user" and turns and turns[-1][2] is None:
            turns[-1][2] = message.get("content") or ""
    return turns


def answers_to(text: str, facts: list[dict], said: list[str]) -> list[str]:
    """What a scripted user answers to a (normalised) agent message: each fact whose ``triggers`` the message
    contains, the first time it is asked; again once only if asked outright in a question that is not a
    confirmation. A fact is ``{"triggers": [...], "text": answer, "given_upfront": bool}``; ``said`` holds the
    user's earlier messages."""
    asking = "?" in text
    confirming = asking and bool(re.search(CONFIRM_PATTERN, text))
    found = []
    for fact in facts:
        if not has_any(text, fact["triggers"]):
            continue
        times = sum(fact["text"] in line for line in said) + (1 if fact["given_upfront"] else 0)
        if times == 0 or (times == 1 and asking and not confirming):
            found.append(fact["text"])
    return found


def fact(key: str, triggers, answer: str, given_upfront: bool = False) -> dict:
    """One fact a scripted user knows, for :func:`answers_to`: asked for by ``triggers``, answered with ``answer``."""
    return {"key": key, "triggers": list(triggers), "text": answer, "given_upfront": given_upfront}


def answer_or_confirm(episode, agent_text: str, persona: dict, max_turns: int) -> "sdk.UserReply | None":
    """The usual first moves of a scripted customer: leave after ``max_turns`` (``persona["closing"]``), ask again
    after an empty message, answer the facts asked for (``persona["answers"]``), confirm a confirmation question
    (``persona["confirm"]``). None when none applies: the env decides the rest."""
    spoken = normalise(agent_text)
    if episode.user_turns >= max_turns:
        return sdk.UserReply(persona["closing"], done=True)
    if not spoken.strip():
        return sdk.UserReply("Sorry, I didn't get that. Can you help me with my request?")
    answers = answers_to(spoken, persona["answers"], [m.get("content") or "" for m in episode.messages
                                                      if m.get("role") == "user"])
    if answers:
        return sdk.UserReply(" ".join(answers))
    return sdk.UserReply(persona["confirm"]) if asks_confirmation(spoken) else None
