"""Offline labeler: labels the built-in capabilities from the trajectory, the task's instructions and the
domain policy. No LLM, deterministic, fast, and blind: it never sees the reward, the success flag, the
reward breakdown or the gold actions (``evidence.blind``), so a label cannot restate the outcome, and a call
is never LACKING merely because it differs from the gold.

It judges behaviour. Each rule collects findings (one capability, PRESENT or LACKING, a reason, and the
evidence: the rule, the message and the values compared, with a confidence); a capability is LACKING when a
finding says so with confidence at least ``evidence.ABSTAIN``, NA with ``abstained`` set when only weaker
findings say so, PRESENT when some finding shows it used well, NA when the episode gave no occasion to judge
it. On τ² airline and retail the domain rules (``policy_airline``, ``policy_retail``) judge every
state-changing call, refusal and transfer against the policy, using the policy functions of
``trace_env.kits`` on the records the agent had read; on ToolSandbox, ``policy_toolsandbox`` judges the phone's
tools. The rules, one function each (their docstrings are printed in the Markdown report):
"""

from __future__ import annotations

import inspect
import json
import re
from functools import lru_cache
from importlib import resources
from collections.abc import Callable

from factory.analyze import policy_airline, policy_retail, policy_toolsandbox, rules_asked, rules_claims, rules_dates, rules_escalation, rules_figures, rules_items, rules_requests, rules_values
from factory.analyze.catalogue import canonical
from factory.analyze.conversation import claims_done, denies_success
from factory.analyze.evidence import ABSTAIN, LACKING, NA, PRESENT, RECORD, TEXT, Evidence, Finding, build_evidence
from factory.analyze.tasks import TaskSpec
from schemas.capability import CapabilityLabel, LabelEvidence, TrajectoryLabel
from schemas.trajectory import Trajectory

ID_SHAPES = {
    "reservation_id": re.compile(r"^[A-Z0-9]{6}$"),
    "order_id": re.compile(r"^#?W\d{7}$"),
    "user_id": re.compile(r"^[a-z]+_[a-z]+_\d+$"),
}
_REJECTED_ARGUMENTS = re.compile(r"validation errors? for|Field required|Input should be|missing \d+ required|unexpected keyword argument", re.I)
"""Tool errors that say the arguments were malformed (τ² validates them with pydantic), not that the request failed."""
_TEXT_CALL = re.compile(r'[{]\s*"name"\s*:\s*"([a-z_]+)"\s*,\s*"(?:arguments|parameters)"\s*:')


def rule_tool_calling_precision(ev: Evidence) -> None:
    """LACKING when the agent writes a tool call as text instead of making it, when a call has malformed JSON
    arguments or arguments the tool rejects as malformed, names a tool the run did not offer (each format's own
    tools: τ-bench's ``think`` is a tool there), breaks the tool's schema (missing field, wrong type, value
    outside an enum), puts one kind of id where another belongs (a user id as a reservation id), or carries a
    value that disagrees with what the agent had seen (see ``argument_values``). PRESENT otherwise; NA with no
    tool call."""
    cap = "tool_calling_precision"
    for utterance in ev.said:
        if utterance.role == "assistant":
            match = _TEXT_CALL.search(utterance.text)
            if match and ev.catalog.knows(match.group(1)) is not False and not ev.trajectory.messages[utterance.index].tool_calls:
                ev.add(cap, LACKING, f"wrote a {match.group(1)} call as text instead of calling the tool", rule="call_written_as_text",
                       at=utterance.index, values={"tool": match.group(1)}, confidence=RECORD)  # fmt: skip
                break
    if not ev.calls:
        return
    for call in ev.calls:
        where = {"at": call.message_index, "confidence": RECORD}
        if call.arguments is None:
            ev.add(cap, LACKING, f"{call.name}: malformed arguments ({call.parse_error})", rule="malformed_arguments",
                   values={"tool": call.name, "arguments": call.raw_arguments[:200]}, **where)  # fmt: skip
            continue
        if ev.catalog.knows(call.name) is False:
            ev.add(cap, LACKING, f"called {call.name!r}, a tool this run did not offer", rule="unknown_tool", values={"tool": call.name}, **where)
            continue
        problems = ev.catalog.schema_errors(call.name, call.arguments, call.raw_arguments)
        if problems:
            ev.add(cap, LACKING, f"{call.name}: {problems[0]}", rule="schema_violation", values={"tool": call.name, "problem": problems[0]}, **where)
            continue
        if call.error and _REJECTED_ARGUMENTS.search(call.result or ""):
            result = " ".join((call.result or "").split())[:80]
            ev.add(cap, LACKING, f"{call.name}: the tool rejected its arguments ({result})", rule="arguments_rejected",
                   values={"tool": call.name, "tool_error": result}, **where)  # fmt: skip
            continue
        for key, item in rules_values.id_values(call.arguments):
            shape = ID_SHAPES.get(key)
            other = next((k for k, p in ID_SHAPES.items() if k != key and p.match(item)), None)
            if shape is not None and not shape.match(item) and other is not None:
                ev.add(cap, LACKING, f"{call.name}: passed {item!r}, a {other.replace('_', ' ')}, as {key}", rule="id_of_another_kind",
                       values={"argument": key, "passed": item, "looks_like": other}, **where)  # fmt: skip
                break
    rules_values.judge_values(ev)
    ev.add(cap, PRESENT, f"{len(ev.calls)} call(s) well-formed", rule="calls_well_formed")


def rule_permission_error_recovery(ev: Evidence) -> None:
    """LACKING when, after a tool error, the agent's next call repeats the identical failing call, or, after a
    failed state-changing call, its next message tells the user the change was made (with no successful retry
    in between). PRESENT when every error was followed by a changed call, an alternative or an explanation. NA
    when no tool call failed."""
    cap = "permission_error_recovery"
    failed = [c for c in ev.calls if c.error]
    for call in failed:
        later = [c for c in ev.calls if c.position > call.position]
        if later and later[0].name == call.name and later[0].raw_arguments == call.raw_arguments:
            ev.add(cap, LACKING, f"repeated the failing call {call.name}({call.raw_arguments[:60]})", rule="repeated_failing_call",
                   at=later[0].message_index, values={"tool": call.name, "tool_error": (call.result or "")[:120]}, confidence=RECORD)  # fmt: skip
            return
        if not ev.catalog.is_write(call.name) or call.result_index is None:
            continue
        reply = next((u for u in ev.said if u.role == "assistant" and u.index > call.result_index), None)
        if reply is None:
            continue
        retried = any(c.name == call.name and c.succeeded and call.position < c.position and c.message_index < reply.index for c in ev.calls)
        claim = claims_done(reply.text, call.name)
        if claim and not retried and not denies_success(reply.text):
            ev.add(cap, LACKING, f"told the user the change was made after {call.name} failed", rule="claimed_failed_change", at=reply.index,
                   values={"tool": call.name, "tool_error": (call.result or "")[:120], "said": claim[:160]}, confidence=TEXT)  # fmt: skip
            return
    if failed:
        ev.add(cap, PRESENT, f"recovered from {len(failed)} tool error(s)", rule="recovered")


def rule_required_communication(ev: Evidence) -> None:
    """For the facts the task requires the agent to tell the user (τ²'s ``communicate_info``: totals, refunds,
    balances, counts): multi_step_task_completion is LACKING when the agent never reported any such figure (it
    never got to that part of the request), and structured_data_reasoning is PRESENT when it reported every
    one. When it reported other figures instead, the cause may be arithmetic, an unverified fact or unfinished
    work, which the record does not tell apart, so no capability is blamed here (``figures`` checks the
    arithmetic it can see). NA for tasks without required facts. This mirrors τ²'s COMMUNICATE check, so on
    tasks graded by it a PRESENT cannot disagree with the outcome."""
    rules_figures.judge_required(ev)


def rule_multi_step_task_completion(ev: Evidence) -> None:
    """LACKING when the user confirmed a change the agent had proposed and the agent never attempted it; when
    the agent told the user a change was made although it made no state-changing call at all; when the user
    asked for something done to all records of a kind (all business reservations, all pending orders, all
    pending t-shirts) and, of the matching records the agent had read, it changed some and left others with no
    word; when the user asked to return or exchange several named items and the call left one out. PRESENT
    when confirmed changes were attempted. NA otherwise."""
    rules_requests.judge(ev)
    rules_items.named_items(ev)


def rule_argument_values(ev: Evidence) -> None:
    """A call's values against what the agent had seen. tool_calling_precision is LACKING when an id, an
    address, a name or a date of birth appears nowhere the agent could have read it (not said by the user, not
    in any tool result: a typo or an invention), when a passenger's date of birth differs from the one the
    profile lists for that person, or when the payment method is not the one the user asked for (the card
    ending in the digits they gave, their gift card, PayPal). On retail exchanges and item modifications,
    structured_data_reasoning is LACKING when the new item contradicts an option value the user asked for
    (size 8, clicky switches, no backlight, the same material) or is not the cheapest (or most expensive)
    variant when the user asked for that, while an available variant of the product the agent had read would
    have matched."""
    rules_items.judge_choices(ev)  # the values of ids and free text are judged in rule_tool_calling_precision


def rule_figures(ev: Evidence) -> None:
    """Arithmetic and counts told to the user, against the figures in the same message and the records.
    structured_data_reasoning is LACKING when a stated sum (``a + b + c = total``, or a list of amounts followed
    by "in total") disagrees with its parts, when a stated count of available options of a product disagrees
    with the product's variants the agent had read, when a stated checked-bag allowance disagrees with the
    membership, cabin and passengers on record, or when a write charged an amount that no charge the agent's
    message before it stated matches (an upgrade priced on part of a trip)."""
    rules_figures.judge(ev)


def rule_datetime(ev: Evidence) -> None:
    """datetime_reasoning against the scenario's "now": LACKING when a flight change the user asked to move by a
    number of days ("the day after my reservation", "delay by one day", "two days later") moves no changed
    flight by that many days from the reservation's own dates, or when a booking or a flight change is for a
    date already past (searches are not judged: looking up a past flight is legitimate). The 24-hour window and flown segments are judged in ``domain_policy``."""
    rules_dates.judge(ev)


def rule_unavailable_claims(ev: Evidence) -> None:
    """structured_data_reasoning is LACKING when the agent says its tools cannot tell what they do tell: on τ²
    airline, that it cannot know flight durations or times, which every flight search returns (TEXT)."""
    rules_claims.judge(ev)


def rule_user_choices(ev: Evidence) -> None:
    """On τ² airline, what the user said against what the calls did (TEXT): tool_calling_precision is LACKING
    for a booking with checked bags after the user said they need none, or a charge to a payment method that
    neither the user nor the agent had named when the profile held several, it had not paid for the
    reservation and the task's instructions give the user a wish for another kind of method; structured_data_reasoning is LACKING when, asked for the cheapest itinerary, the agent chose
    one its own search of that route and date showed a cheaper one to; policy_application is LACKING for
    refusing the user's plan of separate reservations as against the policy (it limits certificates per
    reservation, not reservations)."""
    rules_asked.judge(ev)


def rule_escalation_judgment(ev: Evidence) -> None:
    """LACKING when the agent transferred to a human agent a request the policy let it handle on the records it
    had read (a cancellation with a valid ground; a return, exchange or cancellation the order's status
    allows), or (τ² airline) did not transfer when the user asked to cancel a trip part of which had flown, as
    the policy requires; PRESENT when it transferred that cancellation. NA otherwise: whether any other
    transfer was needed depends on what the request was, which these rules do not guess."""
    rules_escalation.judge(ev)


def rule_domain_policy(ev: Evidence) -> None:
    """precondition_verification, policy_application, structured_data_reasoning and datetime_reasoning on τ²
    airline and retail. precondition_verification is LACKING when a state-changing call was made without the
    reads the policy makes it conditional on (the reservation or order it changes; the user authenticated, in
    retail; the searched flights, the profile's payment methods and membership; the reason for a cancellation),
    whatever the outcome. policy_application is LACKING when the agent allowed what the policy forbids on the
    records it had read (cancelling with no ground, on insurance for a reason it does not cover, changing a
    basic economy trip's flights, removing bags, changing the number of passengers, compensating an ineligible
    user or a delay with no change or cancellation, a second exchange or item modification of one order,
    acting on an order whose status forbids it) or refused what the policy allows (a cancellation with a
    ground, a cabin change before any flight, an order change its status allows). datetime_reasoning is
    LACKING when such a decision hinged on the 24-hour window or on whether a flight had flown and the agent
    got the date arithmetic wrong. structured_data_reasoning is LACKING when a call's values contradict the
    records read (paid-bag counts against the membership allowance, items not in the order, a cabin
    misread). PRESENT when such decisions were right; NA when there were none to judge. On ToolSandbox,
    ``policy_toolsandbox`` judges settings, contacts, messages, reminders and dates."""
    if ev.domain == "airline":
        policy_airline.judge(ev)
    elif ev.domain == "retail":
        policy_retail.judge(ev)
    elif ev.domain == "toolsandbox":
        policy_toolsandbox.judge(ev)


RULES: list[Callable[[Evidence], None]] = [
    rule_domain_policy,
    rule_tool_calling_precision,
    rule_argument_values,
    rule_permission_error_recovery,
    rule_multi_step_task_completion,
    rule_required_communication,
    rule_figures,
    rule_datetime,
    rule_unavailable_claims,
    rule_user_choices,
    rule_escalation_judgment,
]
RULE_NAMES = (
    "precondition_verification", "policy_application", "structured_data_reasoning", "tool_calling_precision",
    "multi_step_task_completion", "permission_error_recovery", "datetime_reasoning", "escalation_judgment",
)  # fmt: skip
"""The names rules file findings under: catalogue names or declared aliases (``catalogue.json``)."""
CAPABILITIES = tuple(dict.fromkeys(canonical(n) for n in RULE_NAMES))
"""What the labels carry: catalogue names only."""


def rule_documentation() -> dict[str, str]:
    """Each rule's docstring, for the Markdown report (one source of truth for the rules' wording)."""
    return {rule.__name__.removeprefix("rule_"): " ".join(inspect.getdoc(rule).split()) for rule in RULES}


def _evidence(findings: list[Finding]) -> list[LabelEvidence]:
    """The findings a label rests on, as a reader checks them (a PRESENT with nothing to point at carries none)."""
    return [LabelEvidence(rule=f.rule, message_index=f.at, compared=f.values) for f in findings[:5] if f.label == LACKING or f.at is not None or f.values]


@lru_cache(maxsize=1)
def rule_trust() -> dict[str, dict[str, float]]:
    """Per rule, how often its LACKING findings were right on the tuning parts of the real labelled set
    (``rule_trust.json``, written by ``tests/analyze/real/calibrate.py``). A rule that was wrong more often than
    right there is not trusted to give a verdict: its findings stay as evidence below ``ABSTAIN``."""
    try:
        raw = json.loads(resources.files(__package__).joinpath("rule_trust.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {str(k): v for k, v in (raw.get("rules") or {}).items()}


def trusted(findings: list[Finding], trust: dict[str, dict[str, float]] | None = None) -> list[Finding]:
    """The findings with each rule's measured trust applied: a distrusted rule's LACKING findings are capped
    just under ``ABSTAIN`` (the label says "abstained: ..." and keeps the evidence)."""
    trust = rule_trust() if trust is None else trust
    out = []
    for f in findings:
        cap = trust.get(f.rule, {}).get("confidence")
        if f.label == LACKING and cap is not None and f.confidence > cap:
            f = Finding(f.capability, f.label, f.reason, f.rule, f.at, f.values, cap)
        out.append(f)
    return out


def verdicts(findings: list[Finding], capabilities: list[str]) -> dict[str, tuple[CapabilityLabel, str, float, bool, list[Finding]]]:
    """Per capability: (label, reason, confidence, abstained, the findings it rests on). LACKING wins over
    PRESENT: one failure is enough; the most trusted LACKING finding gives the reason and the confidence."""
    out: dict[str, tuple[CapabilityLabel, str, float, bool, list[Finding]]] = {}
    for name in capabilities:
        mine = [f for f in findings if canonical(f.capability) == name]
        lacking = sorted((f for f in mine if f.label == LACKING), key=lambda f: -f.confidence)
        present = [f for f in mine if f.label == PRESENT]
        if lacking and lacking[0].confidence >= ABSTAIN:
            kept = [f for f in lacking if f.confidence >= ABSTAIN]
            out[name] = (LACKING, lacking[0].reason, lacking[0].confidence, False, kept)
        elif lacking:
            out[name] = (NA, f"abstained: {lacking[0].reason}", 1.0 - lacking[0].confidence, True, lacking)
        elif present:
            best = max(present, key=lambda f: f.confidence)
            out[name] = (PRESENT, best.reason, best.confidence, False, [best])
        else:
            out[name] = (NA, "no occasion in this episode" if name in CAPABILITIES else "no offline rule for this capability", 1.0, False, [])
    return out


class OfflineLabeler:
    """Labels every built-in capability without an LLM, once: it is deterministic, so repeated runs would
    only repeat the same labels (the selection can resample tasks instead)."""

    deterministic = True
    name = "offline"

    def __init__(self, tasks: dict[str, TaskSpec | None] | None = None, trust: dict[str, dict[str, float]] | None = None) -> None:
        self.tasks = tasks or {}
        self.trust = trust  # None: the shipped rule_trust.json; {}: every rule at its own confidence

    def supports(self, capability: str) -> bool:
        return capability in CAPABILITIES

    def evidence(self, trajectory: Trajectory) -> Evidence:
        return build_evidence(trajectory, self.tasks.get(trajectory.id))

    def findings(self, trajectory: Trajectory) -> list[Finding]:
        """Every rule's findings, before the measured trust is applied."""
        ev = self.evidence(trajectory)
        for rule in RULES:
            ev.rule = rule.__name__.removeprefix("rule_")
            rule(ev)
        return ev.findings

    def label(self, trajectory: Trajectory, capabilities: list[str]) -> list[TrajectoryLabel]:
        findings = trusted(self.findings(trajectory), self.trust)
        return [
            TrajectoryLabel(trajectory_id=trajectory.id, capability=name, label=label, reason=reason, confidence=round(confidence, 3),
                            abstained=abstained, evidence=_evidence(kept))  # fmt: skip
            for name, (label, reason, confidence, abstained, kept) in verdicts(findings, capabilities).items()
        ]
