"""The offline labeler recovers deficits injected into replays of the real τ² tasks' gold actions."""

from __future__ import annotations

import json

import pytest

from factory.analyze.gold import GoldAction, GoldIndex, load_tasks
from factory.testing.injection import INJECTIONS, score
from factory.analyze.offline import RULES, OfflineLabeler, rule_documentation
from schemas.capability import CapabilityLabel
from schemas.messages import FunctionCall, Message, ToolCall
from schemas.trajectory import Trajectory

L, P, N = CapabilityLabel.LACKING, CapabilityLabel.PRESENT, CapabilityLabel.NA
FLOORS = {"precision": 0.9, "recall": 0.9}


@pytest.fixture(scope="module")
def scores(injected_cases, task_files):
    labeler = OfflineLabeler(load_tasks(task_files))
    labels = [label for case in injected_cases for label in labeler.label(case.trajectory, list(RULES))]
    return score(injected_cases, labels, RULES)


def test_injected_set_is_substantial(injected_cases):
    kinds = {case.kind for case in injected_cases}
    assert kinds >= set(INJECTIONS) | {"success", "recovered_error", "noisy_success"}
    assert len(injected_cases) > 1000
    assert sum(c.trajectory.success for c in injected_cases) > 400


@pytest.mark.parametrize("capability", sorted(set(INJECTIONS.values())))
def test_offline_labeler_recovers_injected_deficits(scores, capability):
    s = scores[capability]
    print(f"{capability}: precision {s.precision:.3f} recall {s.recall:.3f} (tp {s.tp}, fp {s.fp}, fn {s.fn})")
    assert s.tp >= 5
    assert s.precision >= FLOORS["precision"], s.fp_examples[:5]
    assert s.recall >= FLOORS["recall"], s.fn_examples[:5]


def test_gold_replays_raise_no_false_alarm(injected_cases, task_files):
    labeler = OfflineLabeler(load_tasks(task_files))
    for case in injected_cases:
        if case.kind == "success":
            lacking = [l for l in labeler.label(case.trajectory, list(RULES)) if l.label == L]
            assert not lacking, (case.trajectory.id, lacking)


def _traj(calls: list[tuple[str, dict | str, str]], success: bool = False) -> Trajectory:
    messages = [Message(role="user", content="Please cancel reservation ABC123, my id is ann_1")]
    for number, (name, args, result) in enumerate(calls):
        raw = args if isinstance(args, str) else json.dumps(args)
        messages.append(Message(role="assistant", tool_calls=[ToolCall(id=f"c{number}", function=FunctionCall(name=name, arguments=raw))]))
        messages.append(Message(role="tool", tool_call_id=f"c{number}", name=name, content=result))
    messages.append(Message(role="assistant", content="Done."))
    return Trajectory(id="t", target="tau2-airline", task_id="x", messages=messages, reward=float(success), success=success)


def _labels(trajectory: Trajectory, gold: list[GoldAction] | None) -> dict[str, CapabilityLabel]:
    index = GoldIndex()
    if gold is not None:
        index.add("airline", "x", gold)
    return {l.capability: l.label for l in OfflineLabeler(index).label(trajectory, list(RULES))}


def test_each_rule_on_a_small_example():
    gold = [GoldAction(name="cancel_reservation", arguments={"reservation_id": "ABC123"})]
    checked = [("get_reservation_details", {"reservation_id": "ABC123"}, '{"reservation_id": "ABC123", "user_id": "ann_1"}')]
    good = _labels(_traj(checked + [("cancel_reservation", {"reservation_id": "ABC123"}, "{}")], True), gold)
    assert good == {**{c: N for c in RULES}, "precondition_verification": P, "structured_data_reasoning": P,
                    "tool_calling_precision": P, "multi_step_task_completion": P}  # fmt: skip

    unchecked = _labels(_traj([("cancel_reservation", {"reservation_id": "ABC123"}, "{}")]), gold)
    assert unchecked["precondition_verification"] == L

    never = _labels(_traj(checked), gold)
    assert never["multi_step_task_completion"] == L and never["precondition_verification"] == N

    malformed = _labels(_traj(checked + [("cancel_reservation", '{"reservation_id": ', "Error: bad json")]), gold)
    assert malformed["tool_calling_precision"] == L

    repeated = _labels(_traj(checked + [("cancel_reservation", {"reservation_id": "ABC123"}, "Error: not allowed")] * 2), gold)
    assert repeated["permission_error_recovery"] == L and repeated["multi_step_task_completion"] == P

    wrong_record = _labels(_traj([("get_user_details", {"user_id": "ann_1"}, '{"reservations": ["ABC123", "XYZ999"]}'),
                                  ("get_reservation_details", {"reservation_id": "XYZ999"}, "{}"),
                                  ("cancel_reservation", {"reservation_id": "XYZ999"}, "{}")]), gold)  # fmt: skip
    # cancelling the other reservation is a wrong-record pick; its primary id was read first
    assert wrong_record["structured_data_reasoning"] == L and wrong_record["precondition_verification"] == P


def test_without_gold_only_gold_free_rules_apply():
    labels = _labels(_traj([("cancel_reservation", {"reservation_id": "ABC123"}, "{}")]), None)
    assert labels["precondition_verification"] == L  # write before any read of its record
    assert labels["tool_calling_precision"] == P
    for name in ("multi_step_task_completion", "structured_data_reasoning", "datetime_reasoning", "escalation_judgment"):
        assert labels[name] == N


def test_date_and_seen_value_classification():
    gold = [GoldAction(name="update_reservation_flights", arguments={"reservation_id": "ABC123", "cabin": "economy",
            "flights": [{"flight_number": "HAT001", "date": "2024-05-20"}], "payment_id": "credit_card_1"})]  # fmt: skip
    read = ("get_reservation_details", {"reservation_id": "ABC123"}, '{"payment_history": [{"payment_id": "gift_card_9"}]}')

    def with_args(**changes):
        args = json.loads(json.dumps(gold[0].arguments))
        args.update(changes)
        return _labels(_traj([read, ("update_reservation_flights", args, "{}")]), gold)

    shifted = with_args(flights=[{"flight_number": "HAT001", "date": "2024-05-21"}])
    assert shifted["datetime_reasoning"] == L and shifted["tool_calling_precision"] == P
    seen = with_args(payment_id="gift_card_9")
    assert seen["structured_data_reasoning"] == L and seen["tool_calling_precision"] == P
    invented = with_args(payment_id="credit_card_2")
    assert invented["tool_calling_precision"] == L and invented["structured_data_reasoning"] == P
    enum = with_args(cabin="first")
    assert enum["tool_calling_precision"] == L


def test_rules_are_documented():
    docs = rule_documentation()
    assert set(docs) == set(RULES)
    assert all(len(text) > 80 and "LACKING" in text for text in docs.values())
