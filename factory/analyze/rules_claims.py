"""Claims that the agent's own tools cannot tell what they do tell (structured_data_reasoning), on τ² airline.

An agent that says it has no way to know a flight's duration or times gives up on requests ("cancel every
trip with a flight over four hours") that the flight searches answer: every search result carries the
scheduled departure and arrival times. Judged on English (TEXT confidence), only when the run offered a
flight search tool.
"""

from __future__ import annotations

import re

from factory.analyze.evidence import LACKING, TEXT, Evidence

CAP = "structured_data_reasoning"
_NO_ACCESS = re.compile(
    r"\b(do(?:n['’]t| not)|cannot|can['’]?t|can not|unable to|not able to|no way to)\b[^.]{0,40}\b(have|access|see|determine|find|get|retrieve|check|know)\b"
    r"[^.]{0,60}\b(duration|how long|flight times?|length of (the|each|your) flights?|departure (and|or) arrival times?)",
    re.IGNORECASE,
)
_SEARCHES = ("search_direct_flight", "search_onestop_flight")


def judge(ev: Evidence) -> None:
    if ev.domain != "airline" or not any(ev.catalog.knows(name) for name in _SEARCHES):
        return
    for utterance in ev.said:
        if utterance.role != "assistant":
            continue
        match = _NO_ACCESS.search(utterance.text)
        if match:
            ev.add(CAP, LACKING, f"said it could not know flight durations or times ({match.group(0)[:80]!r}); the flight searches give every "
                                 "flight's scheduled departure and arrival", rule="durations_said_unavailable", at=utterance.index,
                   values={"claim": match.group(0)[:160]}, confidence=TEXT)  # fmt: skip
            return
