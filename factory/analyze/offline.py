"""Offline labeler: labels the built-in capabilities from the trajectory, the task's instructions and the
domain policy. No LLM, deterministic, fast, and blind: it never sees the reward, the success flag, the
reward breakdown or the gold actions (``evidence.blind``), so a label cannot restate the outcome, and a call
is never LACKING merely because it differs from the gold.

It judges behaviour. Each rule below collects findings (one capability, PRESENT or LACKING, a reason); a
capability is LACKING when any finding says so, PRESENT when some finding shows it used well, NA when the
episode gave no occasion to judge it. On τ² airline and retail the domain rules (``policy_airline``,
``policy_retail``) judge every state-changing call and every refusal against the policy, using the policy
functions of ``trace_env.kits`` on the records the agent had read. The rules, one function each (their
docstrings are printed in the Markdown report):
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable

from factory.analyze import policy_airline, policy_retail
from factory.analyze.conversation import asks_confirmation, claims_done, is_confirmation, refusals, sentences
from factory.analyze.evidence import LACKING, NA, PRESENT, Evidence, Finding, build_evidence
from factory.analyze.tasks import TaskSpec
from schemas.capability import CapabilityLabel, TrajectoryLabel
from schemas.trajectory import Trajectory

TRANSFER = "transfer_to_human_agents"
_STOP = re.compile(r"###(STOP|TRANSFER|OUT-OF-SCOPE)###")
_WRITE_WORDS = re.compile(r"\b(book|cancel|change|modify|update|upgrade|downgrade|add|exchange|return|refund|issue|send|process)\w*", re.I)
ID_SHAPES = {
    "reservation_id": re.compile(r"^[A-Z0-9]{6}$"),
    "order_id": re.compile(r"^#?W\d{7}$"),
    "user_id": re.compile(r"^[a-z]+_[a-z]+_\d+$"),
}
_CONDITION = re.compile(r"\b(but|however|only if|as long as|provided|before (you|we) (proceed|go))\b|\?", re.I)
_INFO_REQUEST = re.compile(r"\b(show|check|look|search|find|tell me|list|let me know|what|how much|how many|which)\b", re.I)
_TOOL_VERB = {"cancel": "cancel", "return": "return", "exchange": "exchang", "book": "book", "update": "updat|chang|add|upgrad",
              "modify": "modif|chang|updat", "send": "issu|sent|certificate"}
_VALUE_KEYS = re.compile(r"(_id|_ids|^flight_number)$")


_PUNCTUATION = str.maketrans({c: " " for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~"})


def _norm(value: object) -> str:
    return str(value).lower().translate(_PUNCTUATION).replace(" ", "")


def _mentioned(value: str, texts: list[str], before: int) -> bool:
    """Whether the user or a tool had said a value before a message: verbatim, or its digits (an order id
    typed without its ``#W``)."""
    plain = _norm(value)
    digits = re.sub(r"\D", "", plain)
    loose = len(digits) >= 5 and digits == plain.lstrip("w")
    return any(plain in text or (loose and digits in text) for text in texts[:before])


def _source_texts(ev: Evidence) -> list[str]:
    """Per message, what an argument value may have come from: user messages and tool results, normalised."""
    return [(m.content or "").lower().translate(_PUNCTUATION) if m.role in ("user", "tool") else "" for m in ev.trajectory.messages]


def _id_values(arguments: object, key: str = "") -> list[tuple[str, str]]:
    """(key, value) for every id-like argument, nested ones included (payment ids inside payment lists)."""
    out: list[tuple[str, str]] = []
    if isinstance(arguments, dict):
        for k, v in arguments.items():
            out += _id_values(v, k)
    elif isinstance(arguments, list):
        for v in arguments:
            out += _id_values(v, key)
    elif isinstance(arguments, str) and arguments.strip() and _VALUE_KEYS.search(key):
        out.append((key, arguments))
    return out


def rule_tool_calling_precision(ev: Evidence) -> None:
    """LACKING when a call has malformed JSON arguments, names a tool the run did not offer (each format's own
    tools: τ-bench's ``think`` is a tool there), breaks the tool's schema (missing field, wrong type, value
    outside an enum), puts one kind of id where another belongs (a user id as a reservation id), or carries an
    id that neither the user nor any tool result had mentioned (an invented value). PRESENT otherwise; NA with
    no tool call."""
    if not ev.calls:
        return
    texts: list[str] | None = None
    for call in ev.calls:
        if call.arguments is None:
            ev.add("tool_calling_precision", LACKING, f"{call.name}: malformed arguments ({call.parse_error})")
            continue
        if ev.catalog.knows(call.name) is False:
            ev.add("tool_calling_precision", LACKING, f"called {call.name!r}, a tool this run did not offer")
            continue
        problems = ev.catalog.schema_errors(call.name, call.arguments, call.raw_arguments)
        if problems:
            ev.add("tool_calling_precision", LACKING, f"{call.name}: {problems[0]}")
            continue
        for key, item in _id_values(call.arguments):
            shape = ID_SHAPES.get(key)
            other = next((k for k, p in ID_SHAPES.items() if k != key and p.match(item)), None)
            if shape is not None and not shape.match(item) and other is not None:
                ev.add("tool_calling_precision", LACKING, f"{call.name}: passed {item!r}, a {other.replace('_', ' ')}, as {key}")
                break
            texts = texts if texts is not None else _source_texts(ev)
            if not _mentioned(item, texts, call.message_index):
                ev.add("tool_calling_precision", LACKING, f"{call.name}: {key} {item!r} appears nowhere the agent could have read it")
                break
    ev.add("tool_calling_precision", PRESENT, f"{len(ev.calls)} call(s) well-formed")


def rule_permission_error_recovery(ev: Evidence) -> None:
    """LACKING when, after a tool error, the agent's next call repeats the identical failing call, or its next
    message tells the user that the failed change was made. PRESENT when every error was followed by a changed
    call, an alternative or an explanation. NA when no tool call failed."""
    failed = [c for c in ev.calls if c.error]
    for call in failed:
        later = [c for c in ev.calls if c.position > call.position]
        if later and later[0].name == call.name and later[0].raw_arguments == call.raw_arguments:
            ev.add("permission_error_recovery", LACKING, f"repeated the failing call {call.name}({call.raw_arguments[:60]})")
            return
        if ev.catalog.is_write(call.name) and call.result_index is not None:
            retried = any(c.name == call.name and c.succeeded and c.position > call.position for c in ev.calls)
            reply = next((u for u in ev.said if u.role == "assistant" and u.index > call.result_index), None)
            verb = next((v for k, v in _TOOL_VERB.items() if call.name.startswith(k)), None)
            claims = [s for s in sentences(reply.text) if claims_done(s)] if reply is not None and verb else []
            if any(re.search(verb, s, re.I) and not re.search(r"\b(not|unable|couldn|could not|failed)\b", s, re.I) for s in claims) and not retried:
                ev.add("permission_error_recovery", LACKING, f"told the user the change was made after {call.name} failed")
                return
    if failed:
        ev.add("permission_error_recovery", PRESENT, f"recovered from {len(failed)} tool error(s)")


def _contains(text: str, value: str) -> bool:
    """Whether a required fact was said: a figure as a number (327 is not in 1,327; 1286 is 1,286.00), a
    word or phrase as itself."""
    wanted = value.replace(",", "").replace("$", "").strip()
    try:
        target = float(wanted)
    except ValueError:
        return bool(wanted) and re.search(r"(?<!\w)" + re.escape(wanted.lower()) + r"(?!\w)", text.lower()) is not None
    numbers = re.findall(r"\d[\d,]*(?:\.\d+)?", text)
    return any(abs(float(n.replace(",", "")) - target) < 0.005 for n in numbers)


def rule_multi_step_task_completion(ev: Evidence) -> None:
    """LACKING when the user confirmed a change the agent had proposed and the agent never attempted it, when
    the agent told the user a change was made although it made no state-changing call at all. PRESENT when
    confirmed changes were attempted. NA otherwise."""
    cap = "multi_step_task_completion"
    for number, utterance in enumerate(ev.said):
        if utterance.role != "user" or _STOP.search(utterance.text) or not is_confirmation(utterance.text):
            continue
        proposal = next((u for u in reversed(ev.said[:number]) if u.role == "assistant"), None)
        if proposal is None or not asks_confirmation(proposal.text) or not _WRITE_WORDS.search(proposal.text):
            continue
        if _CONDITION.search(utterance.text) or _INFO_REQUEST.search(utterance.text):
            continue  # "yes, but only if ..." or "yes, show me ..." is not a go-ahead for a change
        attempted = [c for c in ev.calls if c.message_index > utterance.index and (ev.catalog.is_write(c.name) or c.name == TRANSFER)]
        declined = any(u.role == "assistant" and u.index > utterance.index and refusals(u.text) for u in ev.said)
        if not attempted and not declined:
            ev.add(cap, LACKING, f"the user confirmed ({utterance.text.strip()[:50]!r}) but the agent never made the change")
            return
        if attempted:
            ev.add(cap, PRESENT, "confirmed changes were carried out")
    if not any(ev.catalog.is_write(c.name) for c in ev.calls):
        claim = next((u for u in ev.said if u.role == "assistant" and claims_done(u.text)), None)
        if claim is not None:
            ev.add(cap, LACKING, f"told the user a change was made without making any: {claim.text.strip()[:60]!r}")
            return


_FIGURE = re.compile(r"\$?\d[\d,]*(\.\d+)?")


def rule_required_communication(ev: Evidence) -> None:
    """For each fact the task requires the agent to tell the user (τ²'s ``communicate_info``: totals, refunds,
    balances, counts), LACKING when it never appears in the agent's messages: structured_data_reasoning when
    the agent did report figures (it computed or read the wrong one), multi_step_task_completion when it
    reported none (it never got to that part of the request). PRESENT when every required fact was said.
    NA for tasks without required facts. This mirrors τ²'s COMMUNICATE check, so on tasks graded by it the
    label cannot disagree with the outcome; the report counts such tasks."""
    required = ev.task.communicate_info if ev.task is not None else []
    if not required:
        return
    said = "\n".join(u.text for u in ev.said if u.role == "assistant")
    missing = [v for v in required if not _contains(said, v)]
    if not missing:
        ev.add("structured_data_reasoning", PRESENT, "told the user every figure the task requires")
        return
    if _FIGURE.search(said) and _FIGURE.fullmatch(missing[0].strip()):
        ev.add("structured_data_reasoning", LACKING, f"reported figures, but never {missing[0]!r}, which the task requires")
    else:
        ev.add("multi_step_task_completion", LACKING, f"never told the user {missing[0]!r}, which the task requires")


def rule_escalation_judgment(ev: Evidence) -> None:
    """(τ² airline) LACKING when the user asked to cancel a trip part of which had flown and the agent did not
    transfer to a human agent, as the policy requires; PRESENT when it did. NA otherwise: whether any other
    transfer was needed depends on what the request was, which these rules do not guess."""
    # judged in policy_airline.judge_escalation, on the records the agent had read


def rule_domain_policy(ev: Evidence) -> None:
    """precondition_verification, policy_application, structured_data_reasoning and datetime_reasoning on τ²
    airline and retail. precondition_verification is LACKING when a state-changing call was made without the
    reads the policy makes it conditional on (the reservation or order it changes; the user authenticated, in
    retail; the searched flights, the profile's payment methods and membership; the reason for a cancellation),
    whatever the outcome. policy_application is LACKING when the agent allowed what the policy forbids on the
    records it had read (cancelling with no ground, changing a basic economy trip's flights, removing bags,
    compensating an ineligible user, acting on an order whose status forbids it) or refused what the policy
    allows (a cancellation with a ground, a cabin change before any flight, an order change its status allows).
    datetime_reasoning is LACKING when such a decision hinged on the 24-hour window or on whether a flight had
    flown and the agent got the date arithmetic wrong. structured_data_reasoning is LACKING when a call's
    values contradict the records read (paid-bag counts against the membership allowance, items not in the
    order, a cabin misread). PRESENT when such decisions were right; NA when there were none to judge."""
    if ev.domain == "airline":
        policy_airline.judge(ev)
    elif ev.domain == "retail":
        policy_retail.judge(ev)


RULES: list[Callable[[Evidence], None]] = [
    rule_domain_policy,
    rule_tool_calling_precision,
    rule_permission_error_recovery,
    rule_multi_step_task_completion,
    rule_required_communication,
    rule_escalation_judgment,
]
CAPABILITIES = (
    "precondition_verification", "policy_application", "structured_data_reasoning", "tool_calling_precision",
    "multi_step_task_completion", "permission_error_recovery", "datetime_reasoning", "escalation_judgment",
)  # fmt: skip


def rule_documentation() -> dict[str, str]:
    """Each rule's docstring, for the Markdown report (one source of truth for the rules' wording)."""
    return {rule.__name__.removeprefix("rule_"): " ".join(inspect.getdoc(rule).split()) for rule in RULES}


def verdicts(findings: list[Finding], capabilities: list[str]) -> dict[str, tuple[CapabilityLabel, str]]:
    out: dict[str, tuple[CapabilityLabel, str]] = {}
    for name in capabilities:
        mine = [f for f in findings if f.capability == name]
        lacking = next((f for f in mine if f.label == LACKING), None)
        present = next((f for f in mine if f.label == PRESENT), None)
        if lacking is not None:
            out[name] = (LACKING, lacking.reason)
        elif present is not None:
            out[name] = (PRESENT, present.reason)
        else:
            out[name] = (NA, "no occasion in this episode" if name in CAPABILITIES else "no offline rule for this capability")
    return out


class OfflineLabeler:
    """Labels every built-in capability without an LLM, once: it is deterministic, so repeated runs would
    only repeat the same labels (the statistics say so instead of showing a K-of-N)."""

    deterministic = True
    name = "offline"

    def __init__(self, tasks: dict[str, TaskSpec | None] | None = None) -> None:
        self.tasks = tasks or {}

    def supports(self, capability: str) -> bool:
        return capability in CAPABILITIES

    def evidence(self, trajectory: Trajectory) -> Evidence:
        return build_evidence(trajectory, self.tasks.get(trajectory.id))

    def label(self, trajectory: Trajectory, capabilities: list[str]) -> list[TrajectoryLabel]:
        ev = self.evidence(trajectory)
        for rule in RULES:
            rule(ev)
        return [
            TrajectoryLabel(trajectory_id=trajectory.id, capability=name, label=label, reason=reason)
            for name, (label, reason) in verdicts(ev.findings, capabilities).items()
        ]
