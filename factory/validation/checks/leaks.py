"""Leaks found by prediction: anything an agent sees before doing the capability's work that predicts the
rewarded decision across seeds gives the decision away, whatever its wording.

What the agent sees before the capability's work, per seed: the first message; the user's replies when it asks
the same question again and again (a probe: one question about the request, asked three times); and the tool
results the capability-skipping solution (the agent without the capability, by the author's own word) receives
before its first write or hand-off. Each becomes features with ids masked: words and word pairs, tool-result
fields as ``path=value``, and the first and last character of every id (an id pattern).

Among seeds where the skipping solution acts alike (the request may rightly say what kind of thing to do), for
every feature the best single-feature rule (present -> one decision class, absent -> the commonest class of the
others) is scored against the reference's decision class on every seed: a rule right on
``LEAK_ACCURACY`` of the seeds, well above the base rate (the commonest class's share), with enough seeds on both
sides, is a leak. The feature and its accuracy are reported. A fact a rule reads rarely predicts alone: where one
fact decides every seed, the capability's work is reading it, and the skipping solution should not read it.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from factory.validation.checks.context import CheckContext
from fuzz.turns import decision_class
from schemas.validation import Counterexample, EpisodeSummary, SeedSurvey
from trace_env.scenario_values import looks_like_id

LEAK_SEEDS = 48  # seeds the probes are played on
LEAK_ACCURACY = 0.95  # a single-feature rule right this often...
LEAK_GAIN = 0.2  # ...and this far above the base rate, is a leak
MIN_SIDE = 4  # seeds on each side of the rule (and 10% of them)
ASKED = 3  # how often the probe asks its question
_TOKEN = re.compile(r"[A-Za-z0-9_#@.'-]+")
_WORD = re.compile(r"[a-z][a-z']+")
MAX_FEATURES = 400


@dataclass(frozen=True)
class Leak:
    feature: str
    accuracy: float
    base_rate: float
    seeds: int
    seed: int  # a seed where the feature is present
    actions: list[Any]


def masked(text: str) -> str:
    return " ".join("<id>" if looks_like_id(t.strip(".'-")) else t for t in _TOKEN.findall(text))


def words(text: str, source: str) -> set[str]:
    tokens = _WORD.findall(masked(text).lower().replace("<id>", " "))
    return {f"{source}: {t}" for t in tokens} | {f"{source}: {a} {b}" for a, b in zip(tokens, tokens[1:])}


def id_patterns(text: str, source: str) -> set[str]:
    ids = [t.strip(".'-") for t in _TOKEN.findall(text) if looks_like_id(t.strip(".'-"))]
    return {f"{source} id starting {i[0]!r}" for i in ids} | {f"{source} id ending {i[-1]!r}" for i in ids}


def fields(value: Any, path: str = "", out: set[str] | None = None, depth: int = 0) -> set[str]:
    """``path=value`` of the leaves of a tool result, ids masked in keys and values (numbers kept: an amount that
    recurs exactly with a decision is a leak too)."""
    out = set() if out is None else out
    if depth > 8 or len(out) > MAX_FEATURES:
        return out
    if isinstance(value, dict):
        for key, item in value.items():
            fields(item, f"{path}.{'<id>' if looks_like_id(str(key)) else key}", out, depth + 1)
    elif isinstance(value, list):
        for item in value[:50]:
            fields(item, f"{path}[]", out, depth + 1)
    elif isinstance(value, str):
        if len(value) <= 40:
            out.add(f"field {path}={'<id>' if looks_like_id(value) else value.lower()}")
    else:
        out.add(f"field {path}={json.dumps(value)}")
    return out


def tool_features(text: str) -> set[str]:
    try:
        return fields(json.loads(text))
    except (TypeError, ValueError):
        return words(text, "tool result")


def question(row: SeedSurvey) -> str:
    topic = " ".join(_WORD.findall(masked(row.first_message).lower().replace("<id>", " "))[:10]) or "your request"
    return f"Sorry, just to be sure I understand: could you tell me more about {topic}?"


def seen_before_work(messages: list[dict[str, Any]], decisive: set[str]) -> tuple[list[str], list[str]]:
    """(tool results, user replies after the first message) up to the first decisive call."""
    results, replies = [], []
    for message in messages[2:]:
        role = message.get("role")
        if role == "assistant" and any(isinstance(c, dict) and str((c.get("function") or {}).get("name")) in decisive
                                       for c in message.get("tool_calls") or []):
            break
        if role == "tool":
            results.append(str(message.get("content") or ""))
        elif role == "user":
            replies.append(str(message.get("content") or ""))
    return results, replies


def episodes_with_messages(ctx: CheckContext, items: list[tuple[int, list[Any]]], where: str) -> list[tuple[EpisodeSummary, list[dict[str, Any]]]]:
    """Episodes spread over the lanes with their transcripts; each observed as every gate episode is."""
    size = ctx._chunk(len(items))
    chunks = [items[i:i + size] for i in range(0, len(items), size)]
    calls = [("episodes", {"episodes": [{"seed": s, "turns": t, "templates": True} for s, t in chunk], "with_messages": True},
              min(ctx.config.rpc_timeout_s * 2, sum(ctx.episode_timeout(len(t)) for _, t in chunk))) for chunk in chunks]
    out = []
    for chunk, answer in zip(chunks, ctx.map(calls, seed=items[0][0], actions=items[0][1])):
        if not isinstance(answer, list) or len(answer) != len(chunk):
            raise ValueError(f"asked for {len(chunk)} episodes, the worker returned another answer")
        for (seed, turns), raw in zip(chunk, answer):
            summary = EpisodeSummary.model_validate(raw)
            ctx.episodes_run += 1
            ctx._observe(seed, summary.actions if summary.actions is not None else turns, summary, where)
            messages = raw.get("messages") if isinstance(raw, dict) else None
            out.append((summary, [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []))
    return out


def best_rule(features: list[set[str]], labels: list[str]) -> tuple[str, float, list[bool]] | None:
    """The single feature whose rule predicts ``labels`` best: (feature, accuracy, where present)."""
    n = len(labels)
    base = Counter(labels).most_common(1)[0][1] / n
    side = max(MIN_SIDE, math.ceil(0.1 * n))
    where: dict[str, list[int]] = defaultdict(list)
    for index, found in enumerate(features):
        for feature in found:
            where[feature].append(index)
    best: tuple[str, float, list[bool]] | None = None
    for feature, present in sorted(where.items()):
        if len(present) < side or n - len(present) < side:
            continue
        inside = Counter(labels[i] for i in present)
        chosen = set(present)
        outside = Counter(labels[i] for i in range(n) if i not in chosen)
        label, right = inside.most_common(1)[0]
        rest = max((k for c, k in outside.items() if c != label), default=0)
        accuracy = (right + rest) / n
        if accuracy >= LEAK_ACCURACY and accuracy - base >= LEAK_GAIN and (best is None or accuracy > best[1]):
            best = (feature, accuracy, [i in chosen for i in range(n)])
    return best


def find_leak(ctx: CheckContext, rows: list[SeedSurvey]) -> Leak | None:
    """Play the probes on up to ``LEAK_SEEDS`` seeds and fit the single-feature rules."""
    rows = rows[:LEAK_SEEDS]
    writes = frozenset(ctx.info.get("write_tools") or [])
    terminal = frozenset(ctx.info.get("terminal_tools") or [])
    labels = [decision_class(r.reference.turns, writes, terminal) for r in rows]  # type: ignore[union-attr]
    if len(set(labels)) < 2:
        return None
    probes = [[{"content": question(r), "calls": []} for _ in range(ASKED)] for r in rows]
    items = [(r.seed, r.skipping.turns) for r in rows] + [(r.seed, p) for r, p in zip(rows, probes)]  # type: ignore[union-attr]
    played = episodes_with_messages(ctx, items, "a leak probe")
    skipped, asked = played[: len(rows)], played[len(rows):]
    features: list[set[str]] = []
    for row, (_, skip_messages), (_, ask_messages) in zip(rows, skipped, asked):
        found = words(row.first_message, "first message") | id_patterns(row.first_message, "first message")
        results, _ = seen_before_work(skip_messages, set(writes | terminal))
        for text in results:
            found |= tool_features(text) | id_patterns(text, "tool result")
        _, replies = seen_before_work(ask_messages, set(writes | terminal))
        for text in replies:
            found |= words(text, "user reply") | id_patterns(text, "user reply")
        features.append(found)
    # The request may rightly say what kind of thing to do (an alarm at a time, a timer for a while): seeds are
    # compared only with seeds where the skipping solution acts alike, as the request looks the same to it there.
    groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        groups[tuple(row.skipping.pattern)].append(index)  # type: ignore[union-attr]
    found: Leak | None = None
    for members in groups.values():
        inside = [labels[i] for i in members]
        if len(set(inside)) < 2:
            continue
        rule = best_rule([features[i] for i in members], inside)
        if rule is None or (found is not None and rule[1] <= found.accuracy):
            continue
        feature, accuracy, present = rule
        index = members[present.index(True)]
        base = Counter(inside).most_common(1)[0][1] / len(inside)
        actions = probes[index] if feature.startswith("user reply") else rows[index].skipping.turns  # type: ignore[union-attr]
        found = Leak(feature, accuracy, base, len(members), rows[index].seed, actions)
    return found


def leak_problem(leak: Leak) -> tuple[str, Counterexample]:
    where = ("the user's replies when asked the same question again" if leak.feature.startswith("user reply") else
             "the first message" if leak.feature.startswith("first message") else
             "what the capability-skipping solution sees before it decides")
    message = (f"{where} predicts the decision: the feature {leak.feature!r} alone gives the reference's decision on "
               f"{leak.accuracy:.0%} of {leak.seeds} seeds where the skipping solution acts alike (base rate {leak.base_rate:.0%}); nothing an agent sees before "
               "doing the capability's work may give the decision away, in any words: draw it independently of the truth, "
               "or let the capability's own reads be the only way to it")
    return message, Counterexample(seed=leak.seed, actions=leak.actions, detail=f"{leak.feature}: accuracy {leak.accuracy:.3f}, "
                                   f"base rate {leak.base_rate:.3f} on {leak.seeds} seeds")
