"""Synthetic τ² trajectories with known, injected deficits: the ground truth that checks the offline labeler
(and feeds the benchmark). Built on ``tau2_replay``: replays of the real tasks with results from the real
database through the world kits' faithful tools.

Every deficit is one a careful reader sees in the conversation itself, without the gold and without the
outcome, which is how the offline labeler must see it:

=====================  ===============================================================  ============================
kind                   what the agent does                                              capability expected LACKING
=====================  ===============================================================  ============================
drop_confirmed_write   the user says yes to the listed changes; the agent never makes them  multi_step_task_completion
invented_id            a change names a record id nobody had mentioned (a typo)          tool_calling_precision
silent_on_figure       never tells the user the figures the task asks for                multi_step_task_completion
miscount_bags          charges for checked bags the membership allowance makes free      structured_data_reasoning
wrong_return           books a round trip whose last flight repeats the outbound one     structured_data_reasoning
misjudge_24h           cancels an old booking "because it was booked within 24 hours"    datetime_reasoning
write_before_check     makes a change before reading the record it changes               precondition_verification
unread_write           cancels another reservation or order it never opened              precondition_verification
refuse_allowed         refuses to cancel what the policy allows (business; pending)      policy_application
allow_forbidden        cancels an old economy booking with no insurance                  policy_application
repeat_failed_call     a change errors and the agent repeats it unchanged                permission_error_recovery
flown_no_transfer      refuses a partly flown trip without the transfer the policy wants escalation_judgment
=====================  ===============================================================  ============================

Successes: ``success`` (the careful replay), ``noisy_success`` (a repeated read and a look at another of the
user's records), ``recovered_error`` (a first attempt with a mistyped id errors, then the right call: a
success that still lacked precision once) and ``lucky_unchecked`` (a cancellation made without reading the
reservation, on a task where it happened to be right: a success lacking precondition_verification).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from factory.analyze.tasks import GoldAction
from factory.testing.tau2_replay import CONFIRMED, Say, Step, Tau2Domain, render, success_plan, tasks_with_gold
from schemas.capability import CapabilityLabel, TrajectoryLabel
from schemas.trajectory import Trajectory

INJECTIONS: dict[str, str] = {
    "drop_confirmed_write": "multi_step_task_completion",
    "invented_id": "tool_calling_precision",
    "silent_on_figure": "multi_step_task_completion",
    "miscount_bags": "structured_data_reasoning",
    "wrong_return": "structured_data_reasoning",
    "misjudge_24h": "datetime_reasoning",
    "write_before_check": "precondition_verification",
    "unread_write": "precondition_verification",
    "refuse_allowed": "policy_application",
    "allow_forbidden": "policy_application",
    "repeat_failed_call": "permission_error_recovery",
    "flown_no_transfer": "escalation_judgment",
}
SUCCESS_KINDS: dict[str, list[str]] = {"success": [], "noisy_success": [], "recovered_error": ["tool_calling_precision"],
                                       "lucky_unchecked": ["precondition_verification"]}  # fmt: skip
Plan = list[Step | Say]


class InjectedCase(BaseModel):
    trajectory: Trajectory
    kind: str
    expected: list[str]  # capabilities expected LACKING


def _writes(domain: Tau2Domain, plan: Plan) -> list[int]:
    return [i for i, s in enumerate(plan) if isinstance(s, Step) and s.gold and domain.catalog.is_write(s.name)]


def _user(domain: Tau2Domain, task: dict[str, Any], plan: Plan) -> dict[str, Any] | None:
    gold = [GoldAction(name=s.name, arguments=s.arguments) for s in plan if isinstance(s, Step)]
    return domain.db["users"].get(domain.task_user(task, gold) or "")


def _touched(plan: Plan) -> set[str]:
    return {str(v) for s in plan if isinstance(s, Step) for v in s.arguments.values() if isinstance(v, str)}


def _mistype(value: str, rng: random.Random) -> str:
    chars = list(value)
    spots = [k for k, c in enumerate(chars) if c.isdigit()] or list(range(len(chars)))
    k = rng.choice(spots)
    chars[k] = str((int(chars[k]) + rng.randint(1, 9)) % 10) if chars[k].isdigit() else ("X" if chars[k] != "X" else "Y")
    return "".join(chars)


def _reservations(domain: Tau2Domain, user: dict[str, Any] | None, plan: Plan, test: Callable[[dict[str, Any]], bool]) -> list[str]:
    touched = _touched(plan)
    ids = (user or {}).get("reservations") or []
    return [r for r in ids if r not in touched and r in domain.db["reservations"] and test(domain.db["reservations"][r])]


def _flown(res: dict[str, Any]) -> bool:
    return any(f["date"] < "2024-05-15" for f in res["flights"])


def _ask_and_read(rid: str, key: str = "reservation_id", reader: str = "get_reservation_details") -> Plan:
    return [Say("user", f"Also, please cancel {rid}; my plans changed."), Step(reader, {key: rid}, gold=False)]


def _before_end(plan: Plan, extra: Plan) -> Plan:
    return plan + extra


# ----------------------------------------------------------------------------------------------
def inject_drop_confirmed_write(domain, task, plan, rng):
    if not _writes(domain, plan) or not any(isinstance(s, Say) and s.text == CONFIRMED for s in plan):
        return None
    if any(isinstance(s, Step) and s.name == "transfer_to_human_agents" for s in plan):
        return None  # a transfer after the yes hands the change to a person: not a forgotten change
    return [s for i, s in enumerate(plan) if i not in _writes(domain, plan)]


def inject_invented_id(domain, task, plan, rng):
    options = [i for i in _writes(domain, plan) if domain.catalog.primary_key(plan[i].name, plan[i].arguments)]
    if not options:
        return None
    i = options[-1]  # the last change, so no later step depends on it
    new = copy.deepcopy(plan)
    key = domain.catalog.primary_key(new[i].name, new[i].arguments)
    new[i].arguments[key] = _mistype(new[i].arguments[key], rng)
    return new


def inject_silent_on_figure(domain, task, plan, rng):
    index = next((i for i, s in enumerate(plan) if isinstance(s, Say) and s.text.startswith("To answer your question")), None)
    if index is None:
        return None
    return plan[:index] + plan[index + 1 :]


def inject_miscount_bags(domain, task, plan, rng):
    options = [i for i in _writes(domain, plan) if plan[i].name == "update_reservation_baggages"]
    if not options:
        return None
    new = copy.deepcopy(plan)
    step = new[rng.choice(options)]
    step.arguments["nonfree_baggages"] = step.arguments.get("nonfree_baggages", 0) + 1
    return new


def inject_wrong_return(domain, task, plan, rng):
    """The outbound flight picked again for the way back (a search for it on that day included)."""
    for i in _writes(domain, plan):
        step = plan[i]
        flights = step.arguments.get("flights") or []
        if step.name != "book_reservation" or step.arguments.get("flight_type") != "round_trip" or len(flights) < 2:
            continue
        number, day = flights[0]["flight_number"], flights[-1]["date"]
        record = domain.db["flights"].get(number, {})
        if record.get("dates", {}).get(day, {}).get("status") != "available" or number == flights[-1]["flight_number"]:
            continue
        new = copy.deepcopy(plan)
        new[i].arguments["flights"][-1] = {"flight_number": number, "date": day}
        confirm = next(j for j, s in enumerate(new) if isinstance(s, Say) and s.text == CONFIRMED) - 1
        new.insert(confirm, Step("search_direct_flight", {"origin": record["origin"], "destination": record["destination"], "date": day}, gold=False))
        return new
    return None


def inject_misjudge_24h(domain, task, plan, rng):
    user = _user(domain, task, plan)
    old = _reservations(domain, user, plan, lambda r: not _flown(r) and r["cabin"] != "business" and r["insurance"] == "no"
                        and r["created_at"] < "2024-05-14T15:00:00" and r.get("status") != "cancelled")  # fmt: skip
    if domain.name != "airline" or not old:
        return None
    rid = rng.choice(old)
    return plan + _ask_and_read(rid) + [
        Say("assistant", f"Reservation {rid} was booked within the last 24 hours, so it can be cancelled."),
        Step("cancel_reservation", {"reservation_id": rid}, gold=False),
    ]


def inject_write_before_check(domain, task, plan, rng):
    """The reads of the changed record move to just after the change (the change is made unread)."""
    options = []
    for i in _writes(domain, plan):
        key = domain.catalog.primary_key(plan[i].name, plan[i].arguments)
        value = plan[i].arguments.get(key) if key and key != "user_id" else None
        if "item_ids" in plan[i].arguments:
            continue  # its item ids come from the order it reads: moving the read would also make them unseen
        reads = [j for j in range(i) if isinstance(plan[j], Step) and domain.catalog.is_read(plan[j].name) and value in plan[j].arguments.values()]
        if value is not None and reads:
            options.append((i, reads))
    if not options:
        return None
    i, reads = rng.choice(options)
    moved = [plan[j] for j in reads]
    kept = [s for j, s in enumerate(plan) if j not in reads]
    at = kept.index(plan[i]) + 1
    return kept[:at] + moved + kept[at:]


def inject_unread_write(domain, task, plan, rng):
    user = _user(domain, task, plan)
    if domain.name == "airline":
        ids = _reservations(domain, user, plan, lambda r: not _flown(r) and r.get("status") != "cancelled")
        step = lambda rid: Step("cancel_reservation", {"reservation_id": rid}, gold=False)  # noqa: E731
    else:
        touched = _touched(plan)
        ids = [o for o in (user or {}).get("orders") or [] if o not in touched and domain.db["orders"].get(o, {}).get("status") == "pending"]
        step = lambda oid: Step("cancel_pending_order", {"order_id": oid, "reason": "no longer needed"}, gold=False)  # noqa: E731
    if not ids:
        return None
    record = rng.choice(ids)
    return plan + [Say("user", f"Also, please cancel {record}; I no longer need it."), step(record)]


def inject_refuse_allowed(domain, task, plan, rng):
    user = _user(domain, task, plan)
    if domain.name == "airline":
        ids = _reservations(domain, user, plan, lambda r: not _flown(r) and r["cabin"] == "business" and r.get("status") != "cancelled")
        key, reader = "reservation_id", "get_reservation_details"
    else:
        touched = _touched(plan)
        ids = [o for o in (user or {}).get("orders") or [] if o not in touched and domain.db["orders"].get(o, {}).get("status") == "pending"]
        key, reader = "order_id", "get_order_details"
    if not ids:
        return None
    record = rng.choice(ids)
    return plan + _ask_and_read(record, key, reader) + [Say("assistant", f"I'm sorry, but {record} cannot be cancelled.")]


def inject_allow_forbidden(domain, task, plan, rng):
    user = _user(domain, task, plan)
    old = _reservations(domain, user, plan, lambda r: not _flown(r) and r["cabin"] != "business" and r["insurance"] == "no"
                        and r["created_at"] < "2024-05-14T15:00:00" and r.get("status") != "cancelled")  # fmt: skip
    if domain.name != "airline" or not old:
        return None
    rid = rng.choice(old)
    return plan + _ask_and_read(rid) + [Say("assistant", f"I have cancelled {rid} for you."), Step("cancel_reservation", {"reservation_id": rid}, gold=False)]


def inject_repeat_failed_call(domain, task, plan, rng):
    writes = _writes(domain, plan)
    if not writes:
        return None
    i = writes[-1]  # the last change, so no later step depends on it
    new = copy.deepcopy(plan)
    failing = Step(plan[i].name, plan[i].arguments, gold=True, error="Error: the request could not be processed; the operation is not permitted")
    new[i] = failing
    new.insert(i + 1, copy.deepcopy(failing))
    return new


def inject_flown_no_transfer(domain, task, plan, rng):
    user = _user(domain, task, plan)
    flown = _reservations(domain, user, plan, lambda r: _flown(r) and r.get("status") != "cancelled")
    if domain.name != "airline" or not flown:
        return None
    rid = rng.choice(flown)
    return plan + _ask_and_read(rid) + [Say("assistant", f"I'm sorry, {rid} cannot be cancelled: part of the trip has already been flown.")]


INJECTORS = {
    "drop_confirmed_write": inject_drop_confirmed_write,
    "invented_id": inject_invented_id,
    "silent_on_figure": inject_silent_on_figure,
    "miscount_bags": inject_miscount_bags,
    "wrong_return": inject_wrong_return,
    "misjudge_24h": inject_misjudge_24h,
    "write_before_check": inject_write_before_check,
    "unread_write": inject_unread_write,
    "refuse_allowed": inject_refuse_allowed,
    "allow_forbidden": inject_allow_forbidden,
    "repeat_failed_call": inject_repeat_failed_call,
    "flown_no_transfer": inject_flown_no_transfer,
}


def noisy_success(domain, task, plan, rng):
    """Harmless detours at the end: a read made again, and a look at another of the user's records."""
    db = domain.scratch()
    reads = [s for s in plan if isinstance(s, Step) and domain.catalog.is_read(s.name) and s.arguments and not domain.respond(db, s.name, s.arguments)[1]]
    user = _user(domain, task, plan)
    said = " ".join(s.text for s in plan if isinstance(s, Say)) + " " + " ".join(str(v) for v in task.get("user_scenario", {}).get("instructions", {}).values())
    if domain.name == "airline":
        others = [r for r in _reservations(domain, user, plan, lambda r: True) if r not in said]
    else:
        others = [o for o in (user or {}).get("orders") or [] if o not in _touched(plan) and o not in said]
    if not reads or not others or not any(isinstance(s, Step) and s.name == "get_user_details" for s in plan):
        return None
    key, reader = ("reservation_id", "get_reservation_details") if domain.name == "airline" else ("order_id", "get_order_details")
    return plan + [copy.deepcopy(rng.choice(reads)), Step(reader, {key: rng.choice(others)}, gold=False)]


def recovered_error(domain, task, plan, rng):
    """A first attempt at a change with a mistyped id errors; the right call follows."""
    options = [i for i in _writes(domain, plan) if domain.catalog.primary_key(plan[i].name, plan[i].arguments)]
    if not options:
        return None
    i = rng.choice(options)
    bad = copy.deepcopy(plan[i])
    key = domain.catalog.primary_key(bad.name, bad.arguments)
    bad.arguments[key] = _mistype(bad.arguments[key], rng)
    bad.gold = False
    return plan[:i] + [bad] + plan[i:]


def lucky_unchecked(domain, task, plan, rng):
    """The gold cancellation, made without ever reading the reservation."""
    cancels = {s.arguments.get("reservation_id") for s in plan if isinstance(s, Step) and s.name == "cancel_reservation"}
    if not cancels:
        return None
    return [s for s in plan if not (isinstance(s, Step) and s.name == "get_reservation_details" and s.arguments.get("reservation_id") in cancels)]


SUCCESS_MAKERS = {"noisy_success": noisy_success, "recovered_error": recovered_error, "lucky_unchecked": lucky_unchecked}


def _with_answers(task: dict[str, Any], plan: Plan) -> Plan:
    """A careful agent answers what the user asked: the facts the task requires it to communicate."""
    facts = [str(f) for f in ((task.get("evaluation_criteria") or {}).get("communicate_info") or [])]
    return plan + [Say("assistant", "To answer your question: " + ", ".join(facts) + ".")] if facts else plan


def build_cases(domains: Iterable[Tau2Domain], seed: int = 0, kinds: Iterable[str] | None = None) -> list[InjectedCase]:
    """For every task with gold actions: the careful replay, each success variant and each applicable injection."""
    kinds = list(kinds or INJECTORS)
    rng = random.Random(seed)
    cases: list[InjectedCase] = []
    for domain in domains:
        for task, gold in tasks_with_gold(domain):
            plan = _with_answers(task, success_plan(domain, task, gold))
            base = f"{domain.name}/{task['id']}"
            cases.append(InjectedCase(trajectory=render(domain, task, plan, f"{base}#success", True, "success"), kind="success", expected=[]))
            for variant, make in SUCCESS_MAKERS.items():
                variant_plan = make(domain, task, plan, rng)
                if variant_plan is not None:
                    trajectory = render(domain, task, variant_plan, f"{base}#{variant}", True, variant)
                    cases.append(InjectedCase(trajectory=trajectory, kind=variant, expected=SUCCESS_KINDS[variant]))
            for kind in kinds:
                new_plan = INJECTORS[kind](domain, task, plan, rng)
                if new_plan is not None:
                    trajectory = render(domain, task, new_plan, f"{base}#{kind}", False, kind)
                    cases.append(InjectedCase(trajectory=trajectory, kind=kind, expected=[INJECTIONS[kind]]))
    return cases


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    fp_examples: list[str] = field(default_factory=list)
    fn_examples: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


def score(cases: list[InjectedCase], labels: list[TrajectoryLabel], capabilities: Iterable[str]) -> dict[str, Score]:
    """Per capability: predicted LACKING against expected LACKING, over every case (successes included)."""
    lacking = {(l.trajectory_id, l.capability): l for l in labels if l.label == CapabilityLabel.LACKING}
    out = {c: Score() for c in capabilities}
    for case in cases:
        tid = case.trajectory.id
        for capability, s in out.items():
            predicted = (tid, capability) in lacking
            expected = capability in case.expected
            if predicted and expected:
                s.tp += 1
            elif predicted:
                s.fp += 1
                s.fp_examples.append(f"{tid}: {lacking[(tid, capability)].reason}")
            elif expected:
                s.fn += 1
                s.fn_examples.append(tid)
    return out
