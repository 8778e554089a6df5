"""Policies composed from primitives, for the gate's budgeted exploit search (``factory.validation.checks.search``).

The exploit library (:mod:`fuzz.exploits`) names the holes someone already thought of; a learner finds others by
composing small moves until the reward pays. A :class:`Policy` here is such a composition: a short sequence of
:class:`Gene` s, each a primitive a learner stumbles on early:

- ``reads``: the reference's read calls; ``read_all``: every read tool on values copied from what was seen;
- ``write_seen``: a write tool on values drawn from what the agent saw (ids read, enum values in turn);
  ``write_widened``: the same, with every list argument widened to everything read (a shotgun);
  ``write_nudged``: one of the reference's writes with its numbers nudged;
- ``ref_writes`` / ``ref_writes_reordered`` / ``ref_writes_twice``: the reference's writes alone (no reads),
  reversed, or each made twice;
- ``answer``: a template answer (yes, no, done, a refusal); ``prose``: a long, polite paragraph that decides
  nothing (no yes/no word, no negation);
- ``llm_turn``: text beside a tool call in one turn (how LLMs answer): a template answer or the prose next to a
  read call;
- ``ask_twice``: the same question to the user twice, then what the user said last said back.

Everything is rendered as wire turns (templates such as ``{"$pool": ...}`` and ``{"$all": ...}`` are resolved in
the sandbox, :mod:`trace_env.scenario_values`), so the best policy replays as plain JSON. Rendering uses only the
genes and the seed's :class:`~fuzz.exploits.ExploitInput`: deterministic given the run seed.
"""

from __future__ import annotations

import copy
import random
import re
from dataclasses import dataclass
from typing import Any

from fuzz import numbers as num
from fuzz.exploits import ExploitInput, copied_arguments, reference_reads
from fuzz.turns import NEGATIVE, calls_of, calls_turn, say

Turns = list[Any]

KINDS = ("reads", "read_all", "write_seen", "write_widened", "write_nudged", "ref_writes", "ref_writes_reordered",
         "ref_writes_twice", "answer", "prose", "llm_turn", "ask_twice")
ANSWERS = ("Yes, that is done for you.", "No, I am sorry, that is not possible.", "All done: your request is complete.",
           "Unfortunately I cannot do that under our policy.")
_POLAR = re.compile(r"\b(" + "|".join(re.escape(a) for a, _ in NEGATIVE) + r"|yes|approved|done|confirmed|completed|eligible)\b",
                    re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][a-z]{3,}")
PROSE_OPENINGS = ("Thank you so much for reaching out and for your patience while I looked into this.",
                  "I really appreciate you contacting us today, and I understand how much this matters to you.",
                  "Thanks for getting in touch; I have gone through everything you shared with care.")
PROSE_BODY = ("Requests like this one depend on several details, and I always want each of them to be "
              "considered thoroughly and fairly, in line with how we handle every {topics} question. "
              "Please know that your situation is important to us, and that I have taken the time to review the "
              "relevant {topics} information together with the guidelines that apply. "
              "Our aim is always to find the most appropriate outcome for each customer, and we value your trust "
              "and your loyalty very much. If anything else comes to mind, I am here and happy to help further.")


@dataclass(frozen=True)
class Gene:
    """One primitive and its variant number (which tool, which values, which wording)."""

    kind: str
    arg: int = 0

    def to_json(self) -> list[Any]:
        return [self.kind, self.arg]


Policy = tuple[Gene, ...]


def describe(policy: Policy) -> str:
    return " + ".join(f"{g.kind}({g.arg})" for g in policy) or "nothing"


def prose(x: ExploitInput, arg: int) -> str:
    """A long, courteous paragraph on the task's topic that decides nothing: no yes/no word, no negation."""
    topics = [w.lower() for w in _WORD.findall(x.description + " " + x.first_message) if not _POLAR.fullmatch(w)]
    topics = list(dict.fromkeys(t for t in topics if t not in {"agent", "must", "only", "when", "with", "that", "this"}))[:6]
    body = PROSE_BODY.format(topics=", ".join(topics) or "account")
    return f"{PROSE_OPENINGS[arg % len(PROSE_OPENINGS)]} {body}"


def answer_text(x: ExploitInput, arg: int) -> str:
    options = list(ANSWERS) + [prose(x, arg)]
    return options[arg % len(options)]


def _writes(x: ExploitInput) -> list[str]:
    return [n for n in x.tool_names() if n in x.write_tools]


def _reads(x: ExploitInput) -> list[str]:
    return [n for n in x.tool_names() if n not in x.write_tools]


def seen_arguments(x: ExploitInput, name: str, salt: int, widened: bool) -> dict[str, Any]:
    """Arguments of ``name`` drawn from what the agent saw: strings and numbers copied from earlier results (the
    ``salt``-th such value), enums and booleans in turn; with ``widened``, every list argument is every value read."""
    properties = x.parameters(name).get("properties")
    out: dict[str, Any] = {}
    for key, schema in (properties.items() if isinstance(properties, dict) else []):
        schema = schema if isinstance(schema, dict) else {}
        kind = schema.get("type") if isinstance(schema.get("type"), str) else "string"
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            out[key] = schema["enum"][salt % len(schema["enum"])]
        elif kind == "boolean":
            out[key] = bool(salt % 2 == 0)
        elif kind == "array":
            items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
            item_kind = items.get("type") if isinstance(items.get("type"), str) else "string"
            single = key[:-1] if key.endswith("s") else key
            out[key] = ({"$all": single, "type": item_kind} if widened
                        else [{"$pool": salt, "type": item_kind, "key": single, "from": "seen"}])
        elif kind == "object":
            out[key] = {}
        else:
            out[key] = {"$pool": salt, "type": kind, "key": key, "from": "seen"}
    return out


def reference_writes(x: ExploitInput) -> list[dict[str, Any]]:
    names = x.write_tools | x.terminal_tools
    return [copy.deepcopy(c) for turn in x.reference for c in calls_of(turn) if c.get("name") in names]


def nudged(call: dict[str, Any], arg: int) -> dict[str, Any] | None:
    arguments = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
    keys = [k for k, v in arguments.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not keys:
        return None
    key = keys[arg % len(keys)]
    options = [arguments[key] + 1, *num.near_argument(arguments[key])]
    return {**call, "arguments": {**arguments, key: options[(arg // len(keys)) % len(options)]}}


def question(x: ExploitInput) -> str:
    words = [w.lower() for w in _WORD.findall(x.first_message) if not _POLAR.fullmatch(w)][:8]
    return f"Before I go on, could you tell me more about {' '.join(words) or 'your request'}?"


def render_gene(gene: Gene, x: ExploitInput) -> Turns:
    """The turns one primitive plays on one seed (none where it does not apply)."""
    kind, arg = gene.kind, gene.arg
    if kind == "reads":
        return reference_reads(x)
    if kind == "read_all":
        reads = _reads(x)
        return [calls_turn([{"name": n, "arguments": copied_arguments(x.parameters(n), arg + k, seen=bool(arg + k))}
                            for n in reads for k in range(2)])] if reads else []
    if kind in ("write_seen", "write_widened"):
        writes = _writes(x)
        if not writes:
            return []
        name = writes[arg % len(writes)]
        return [calls_turn([{"name": name, "arguments": seen_arguments(x, name, arg // len(writes), kind == "write_widened")}])]
    if kind == "write_nudged":
        changed = [c for c in (nudged(call, arg) for call in reference_writes(x)) if c is not None]
        return [calls_turn([changed[arg % len(changed)]])] if changed else []
    if kind.startswith("ref_writes"):
        writes = reference_writes(x)
        if kind == "ref_writes_reordered":
            writes.reverse()
        elif kind == "ref_writes_twice":
            writes = [c for call in writes for c in (call, copy.deepcopy(call))]
        return [calls_turn([c]) for c in writes]
    if kind == "answer":
        return [say(answer_text(x, arg))]
    if kind == "prose":
        return [say(prose(x, arg))]
    if kind == "llm_turn":
        reads = reference_reads(x)
        call = calls_of(reads[arg % len(reads)])[0] if reads else None
        if call is None:
            names = _reads(x)
            if not names:
                return []
            call = {"name": names[arg % len(names)], "arguments": copied_arguments(x.parameters(names[arg % len(names)]), arg, seen=True)}
        return [{"content": answer_text(x, arg), "calls": [call]}]
    if kind == "ask_twice":
        asked = question(x)
        return [say(asked), say(asked), {"content": {"$echo": "user"}, "calls": []}]
    raise ValueError(f"unknown primitive {kind!r}")


def render(policy: Policy, x: ExploitInput, max_turns: int) -> Turns:
    turns: Turns = []
    for gene in policy:
        turns.extend(render_gene(gene, x))
    return turns[:max_turns] or [say(answer_text(x, 0))]


# --- the search's moves ------------------------------------------------------------------------------


def seeds_of_search() -> list[Policy]:
    """Where the search starts: every primitive alone, after the reference's reads, and the shapes a learner tries
    first (read then write on what it saw, then an answer)."""
    out: list[Policy] = []
    for kind in KINDS:
        out.append((Gene(kind),))
        if kind != "reads":
            out.append((Gene("reads"), Gene(kind)))
    out += [(Gene("reads"), Gene("write_widened"), Gene("prose")), (Gene("read_all"), Gene("write_widened"), Gene("answer", 2)),
            (Gene("reads"), Gene("write_seen"), Gene("answer")), (Gene("reads"), Gene("llm_turn", 4))]
    return list(dict.fromkeys(out))


MAX_GENES = 5


def mutate(policy: Policy, rng: random.Random) -> Policy:
    """One small move: insert, drop, replace or swap a primitive, or change one's variant."""
    genes = list(policy)
    move = rng.choice(["insert", "drop", "replace", "swap", "arg", "arg"] if genes else ["insert"])
    if move == "insert" and len(genes) < MAX_GENES:
        genes.insert(rng.randrange(len(genes) + 1), Gene(rng.choice(KINDS), rng.randrange(6)))
    elif move == "drop" and len(genes) > 1:
        del genes[rng.randrange(len(genes))]
    elif move == "replace":
        genes[rng.randrange(len(genes))] = Gene(rng.choice(KINDS), rng.randrange(6))
    elif move == "swap" and len(genes) > 1:
        i, j = rng.sample(range(len(genes)), 2)
        genes[i], genes[j] = genes[j], genes[i]
    else:
        i = rng.randrange(len(genes))
        genes[i] = Gene(genes[i].kind, (genes[i].arg + 1 + rng.randrange(5)) % 12)
    return tuple(genes)


# --- what a policy decided ----------------------------------------------------------------------------------

_NEG = re.compile(r"\b(" + "|".join(re.escape(a) for a, _ in NEGATIVE) + r"|unfortunately|sorry)\b", re.IGNORECASE)
_POS = re.compile(r"\b(yes|approved|done|confirmed|completed|eligible|sure)\b", re.IGNORECASE)


def stance(texts: list[str]) -> str:
    """The polarity of what was said: ``yes``, ``no``, ``both`` (hedged) or ``none`` (decided nothing)."""
    joined = "\n".join(texts)
    negative, positive = bool(_NEG.search(joined)), bool(_POS.search(_NEG.sub(" ", joined)))
    return "both" if negative and positive else "no" if negative else "yes" if positive else "none"


def texts_of(turns: Turns) -> list[str]:
    return [str(t["content"]) for t in turns if isinstance(t, dict) and isinstance(t.get("content"), str) and t["content"].strip()]


def reference_stance(reference: Turns) -> str:
    """The reference's answer: the stance of its last words."""
    said = texts_of(reference)
    return stance(said[-1:]) if said else "none"
