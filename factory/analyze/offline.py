"""Offline labeler: labels the built-in capabilities from the trajectory, the task's instructions and the
domain policy. No LLM, deterministic, fast, and blind: it never sees the reward, the success flag, the
reward breakdown or the gold actions (``evidence.blind``), so a label cannot restate the outcome, and a call
is never LACKING merely because it differs from the gold.

It judges behaviour. Each rule below collects findings (one capability, PRESENT or LACKING, a reason); a
capability is LACKING when any finding says so, PRESENT when some finding shows it used well, NA when the
episode gave no occasion to judge it. On ToolSandbox, ``policy_toolsandbox`` judges the phone's tools. On τ²
airline and retail the domain rules (``policy_airline``, ``policy_retail``) judge every state-changing call and every refusal against the policy, using the policy
functions of ``trace_env.kits`` on the records the agent had read. The rules, one function each (their
docstrings are printed in the Markdown report):
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable

from factory.analyze import policy_airline, policy_retail, policy_toolsandbox
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
_CLAIM_OBJECT = {
    "cancel_reservation": r"cancel", "cancel_pending_order": r"cancel", "return_delivered_order_items": r"return",
    "exchange_delivered_order_items": r"exchang", "book_reservation": r"book", "send_certificate": r"certificate|voucher",
    "update_reservation_flights": r"flight|cabin|class|upgrad|downgrad", "update_reservation_baggages": r"bag|luggage",
    "update_reservation_passengers": r"passenger|name", "modify_pending_order_items": r"\bitems?\b|swap|exchang",
    "modify_pending_order_address": r"address", "modify_pending_order_payment": r"payment", "modify_user_address": r"address",
}  # fmt: skip
"""What a message must mention to claim that a given change was made."""
_REJECTED_ARGUMENTS = re.compile(r"validation errors? for|Field required|Input should be|missing \d+ required|unexpected keyword argument", re.I)
"""Tool errors that say the arguments were malformed (τ² validates them with pydantic), not that the request failed."""
_TEXT_CALL = re.compile(r'[{]\s*"name"\s*:\s*"([a-z_]+)"\s*,\s*"(?:arguments|parameters)"\s*:')
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
    """LACKING when the agent writes a tool call as text instead of making it, when a call has malformed JSON
    arguments or arguments the tool rejects as malformed, names a tool the run did not offer (each format's own
    tools: τ-bench's ``think`` is a tool there), breaks the tool's schema (missing field, wrong type, value
    outside an enum), puts one kind of id where another belongs (a user id as a reservation id), or carries an
    id that neither the user nor any tool result had mentioned (an invented value). PRESENT otherwise; NA with
    no tool call."""
    for utterance in ev.said:
        if utterance.role == "assistant":
            match = _TEXT_CALL.search(utterance.text)
            if match and ev.catalog.knows(match.group(1)) is not False and not ev.trajectory.messages[utterance.index].tool_calls:
                ev.add("tool_calling_precision", LACKING, f"wrote a {match.group(1)} call as text instead of calling the tool")
                break
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
        if call.error and _REJECTED_ARGUMENTS.search(call.result or ""):
            ev.add("tool_calling_precision", LACKING, f"{call.name}: the tool rejected its arguments ({' '.join((call.result or '').split())[:80]})")
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
            subject = _CLAIM_OBJECT.get(call.name)
            claims = [s for s in sentences(reply.text) if claims_done(s)] if reply is not None and subject else []
            if any(re.search(subject, s, re.I) and not re.search(r"\b(not|unable|couldn|could not|failed)\b", s, re.I) for s in claims) and not retried:
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


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_FIGURE = re.compile(r"(?<![\w#.-])\$?\d[\d,]*(\.\d+)?(?![\w-])")
"""A figure told to the user: a standalone number or amount (ids such as HAT123, #W1234567, card_1234 and ISO
dates are not figures)."""


def rule_required_communication(ev: Evidence) -> None:
    """For the facts the task requires the agent to tell the user (τ²'s ``communicate_info``: totals, refunds,
    balances, counts): multi_step_task_completion is LACKING when the agent never reported any such figure (it
    never got to that part of the request), and structured_data_reasoning is PRESENT when it reported every
    one. When it reported other figures instead, the cause may be arithmetic, an unverified fact or unfinished
    work, which the record does not tell apart, so no capability is blamed. NA for tasks without required
    facts. This mirrors τ²'s COMMUNICATE check, so on tasks graded by it a PRESENT cannot disagree with the
    outcome."""
    required = ev.task.communicate_info if ev.task is not None else []
    if not required:
        return
    said = "\n".join(u.text for u in ev.said if u.role == "assistant")
    missing = [v for v in required if not _contains(said, v)]
    if not missing:
        ev.add("structured_data_reasoning", PRESENT, "told the user every figure the task requires")
    elif not _FIGURE.search(_ISO_DATE.sub(" ", said)) or not _FIGURE.fullmatch(missing[0].strip()):
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
    order, a cabin misread). PRESENT when such decisions were right; NA when there were none to judge. On
    ToolSandbox, ``policy_toolsandbox`` judges settings, contacts, messages, reminders and dates."""
    if ev.domain == "airline":
        policy_airline.judge(ev)
    elif ev.domain == "retail":
        policy_retail.judge(ev)
    elif ev.domain == "toolsandbox":
        policy_toolsandbox.judge(ev)


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
