"""The offline labeler judges behaviour against the task and the policy, never the outcome or the gold.

Injected deficits in replays of the real τ² tasks are found; each defect the first real-data review found is
reproduced on a small fixture in τ²'s own file format and now labeled right."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from factory.analyze.catalogue import canonical
from factory.analyze.importers import load_trajectories
from factory.analyze.offline import CAPABILITIES, OfflineLabeler, rule_documentation
from factory.analyze.tasks import embedded_task
from factory.testing.injection import INJECTIONS, SUCCESS_KINDS, score
from schemas.capability import CapabilityLabel
from tests.analyze import tau2_fixtures as fx

L, P, N = CapabilityLabel.LACKING, CapabilityLabel.PRESENT, CapabilityLabel.NA
FLOOR = 0.9
RAW: dict = {}
"""These tests check each rule's logic, so every rule gives its verdict at its own confidence; the trust measured
on real trajectories (``rule_trust.json``, which makes some rules abstain) is tested in ``test_analyze_real``."""


def label_file(path: Path) -> list[dict[str, tuple[CapabilityLabel, str]]]:
    trajectories = load_trajectories([path]).trajectories
    labeler = OfflineLabeler({t.id: embedded_task(t) for t in trajectories}, trust=RAW)
    return [{l.capability: (l.label, l.reason) for l in labeler.label(t, list(CAPABILITIES))} for t in trajectories]


def one(tmp_path: Path, turns: list[tuple], reward: float = 0.0, task: dict | None = None, name: str = "run") -> dict:
    data = fx.results([fx.simulation("1", 0, reward, fx.conversation(*turns))], [task or fx.task("1")])
    (labels,) = label_file(fx.write(tmp_path / f"{name}.json", data))
    return labels


# ---------------------------------------------------------------------------------------------
# injected deficits on the real tasks
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scores(injected_cases):
    labeler = OfflineLabeler({c.trajectory.id: embedded_task(c.trajectory) for c in injected_cases}, trust=RAW)
    labels = [label for case in injected_cases for label in labeler.label(case.trajectory, list(CAPABILITIES))]
    cases = [c.model_copy(update={"expected": [canonical(e) for e in c.expected]}) for c in injected_cases]  # injections name the alias
    return score(cases, labels, CAPABILITIES)


def test_injected_set_is_substantial(injected_cases):
    kinds = {case.kind for case in injected_cases}
    assert kinds >= set(INJECTIONS) | set(SUCCESS_KINDS)
    assert len(injected_cases) > 1000
    assert sum(c.trajectory.success for c in injected_cases) > 350


@pytest.mark.parametrize("capability", sorted({canonical(c) for c in INJECTIONS.values()}))
def test_offline_labeler_recovers_injected_deficits(scores, capability):
    s = scores[capability]
    print(f"{capability}: precision {s.precision:.3f} recall {s.recall:.3f} (tp {s.tp}, fp {s.fp}, fn {s.fn})")
    assert s.tp >= 5
    assert s.precision >= FLOOR, s.fp_examples[:5]
    assert s.recall >= FLOOR, s.fn_examples[:5]


def test_careful_replays_of_the_gold_raise_no_alarm(injected_cases):
    labeler = OfflineLabeler({c.trajectory.id: embedded_task(c.trajectory) for c in injected_cases}, trust=RAW)
    for case in injected_cases:
        if case.kind in ("success", "noisy_success"):
            lacking = [l for l in labeler.label(case.trajectory, list(CAPABILITIES)) if l.label == L]
            assert not lacking, (case.trajectory.id, lacking)


# ---------------------------------------------------------------------------------------------
# defect 1: the labels leaked the outcome, and ER+ was zero by construction
# ---------------------------------------------------------------------------------------------
def test_a_lucky_success_is_labelled_lacking(tmp_path: Path):
    """A cancellation made without opening the reservation, which happened to be eligible: a success that
    lacks precondition_verification (so ER+ is not zero by construction), while the decision itself was right."""
    labels = one(tmp_path, fx.cancel_turns(fx.BUSINESS, read=False), reward=1.0)
    assert labels["precondition_verification"][0] == L and "without reading that reservation" in labels["precondition_verification"][1]
    checked = one(tmp_path, fx.cancel_turns(fx.BUSINESS, read=True), reward=1.0)
    assert checked["precondition_verification"][0] == P and checked["precondition_verification"][0] == P


def test_labels_never_see_the_outcome_or_the_gold(tmp_path: Path):
    turns = fx.cancel_turns(fx.OLD_ECONOMY)
    won = fx.results([fx.simulation("1", 0, 1.0, fx.conversation(*turns))], [fx.task("1", actions=[{"name": "cancel_reservation", "arguments": {"reservation_id": "OLD456"}}])])
    lost = fx.results([fx.simulation("1", 0, 0.0, fx.conversation(*turns))], [fx.task("1", actions=[])])
    (a,) = label_file(fx.write(tmp_path / "won.json", won))
    (b,) = label_file(fx.write(tmp_path / "lost.json", lost))
    assert a == b
    assert a["precondition_verification"][0] == L  # no ground to cancel an old economy booking, whatever the gold said


def test_a_call_that_differs_from_the_gold_is_not_lacking_for_that(tmp_path: Path):
    """The gold refuses; the agent cancels a business booking it read, for a stated reason: allowed."""
    task = fx.task("1", actions=[{"name": "get_reservation_details", "arguments": {"reservation_id": "BUS123"}}])
    labels = one(tmp_path, fx.cancel_turns(fx.BUSINESS), task=task)
    assert {c: v[0] for c, v in labels.items() if v[0] == L} == {}
    assert labels["precondition_verification"][0] == P and labels["precondition_verification"][0] == P


# ---------------------------------------------------------------------------------------------
# defect 3: cause taken from the symptom's bucket; policy application had no rule
# ---------------------------------------------------------------------------------------------
def test_refusing_an_allowed_request_is_policy_application(tmp_path: Path):
    refusal = "I'm sorry, but reservation BUS123 is not eligible for cancellation under our policy."
    labels = one(tmp_path, fx.cancel_turns(fx.BUSINESS, cancel=False, refusal=refusal))
    assert labels["precondition_verification"][0] == L and "business_cabin" in labels["precondition_verification"][1]
    assert labels["multi_step_task_completion"][0] != L  # a refusal is a decision, not a forgotten step
    right = one(tmp_path, fx.cancel_turns(fx.OLD_ECONOMY, cancel=False, refusal=refusal.replace("BUS123", "OLD456")))
    assert right["precondition_verification"][0] == P


def test_allowing_a_forbidden_request_is_policy_application(tmp_path: Path):
    labels = one(tmp_path, fx.cancel_turns(fx.OLD_ECONOMY))
    # policy_application is an alias of precondition_verification: the label is the policy decision (no ground to
    # cancel), not a missing read (it did read the record and ask the reason)
    assert labels["precondition_verification"][0] == L and "no ground holds" in labels["precondition_verification"][1]
    assert labels["multi_step_task_completion"][0] != L


def test_refusing_a_basic_economy_upgrade_is_policy_application(tmp_path: Path):
    turns = [
        ("user", "I want to upgrade reservation BAS321 to economy. My user id is emma_kim_9957."),
        ("call", "get_reservation_details", {"reservation_id": "BAS321"}, fx.BASIC),
        ("assistant", "Unfortunately, upgrading the cabin class of a basic economy reservation is not allowed under the policy."),
        ("user", "Oh well. ###STOP###"),
    ]
    assert one(tmp_path, turns)["precondition_verification"][0] == L


def test_the_24_hour_window_is_datetime_reasoning(tmp_path: Path):
    claim = fx.cancel_turns(fx.OLD_ECONOMY)
    claim.insert(3, ("assistant", "Your booking was made within the last 24 hours, so it can be cancelled."))
    labels = one(tmp_path, claim)
    assert labels["datetime_reasoning"][0] == L and labels["precondition_verification"][0] != L
    refusal = "Reservation NEW999 was booked more than 24 hours ago, so it cannot be cancelled."
    recent = one(tmp_path, fx.cancel_turns(fx.RECENT, cancel=False, refusal=refusal))
    assert recent["datetime_reasoning"][0] == L and "within 24 h" in recent["datetime_reasoning"][1]


def test_values_seen_earlier_are_not_a_structured_data_failure(tmp_path: Path):
    """The old rules called any argument seen earlier (\"0\", \"2\") structured_data_reasoning, a different
    passenger list tool_calling_precision and a date-of-birth difference datetime_reasoning."""
    record = copy.deepcopy(fx.OLD_ECONOMY)
    turns = [
        ("user", "Please change the passenger on OLD456 to Ann Lee, born 1990-02-03. My user id is emma_kim_9957."),
        ("call", "get_user_details", {"user_id": "emma_kim_9957"}, fx.USER),
        ("call", "get_reservation_details", {"reservation_id": "OLD456"}, record),
        ("assistant", "I will change the passenger of OLD456 to Ann Lee (1990-02-03). Do you confirm? Please answer yes to proceed."),
        ("user", "Yes, please proceed."),
        ("call", "update_reservation_passengers", {"reservation_id": "OLD456", "passengers": [{"first_name": "Ann", "last_name": "Lee", "dob": "1990-02-03"}]}, record),
        ("user", "Thanks ###STOP###"),
    ]  # fmt: skip
    task = fx.task("1", actions=[{"name": "update_reservation_passengers", "arguments": {"reservation_id": "OLD456", "passengers": [{"first_name": "Ann", "last_name": "Lee", "dob": "1990-02-04"}]}}])
    labels = one(tmp_path, turns, task=task)
    assert labels["structured_data_reasoning"][0] != L and labels["tool_calling_precision"][0] == P and labels["datetime_reasoning"][0] == N


def test_required_communications(tmp_path: Path):
    turns = [("user", "What is the sum of my gift card balances? My user id is emma_kim_9957."),
             ("call", "get_user_details", {"user_id": "emma_kim_9957"}, fx.USER)]  # fmt: skip
    task = fx.task("1", communicate=["327"])
    assert one(tmp_path, turns + [("assistant", "Your balances add up to $327.")], task=task)["structured_data_reasoning"][0] == P
    wrong = one(tmp_path, turns + [("assistant", "Your balances add up to $1,327.")], task=task)
    assert wrong["structured_data_reasoning"][0] == N and wrong["multi_step_task_completion"][0] == N  # cause unknown: no blame
    silent = one(tmp_path, turns + [("assistant", "Let me check reservation BUS123 for you (HAT100, 2024-05-20).")], task=task)
    assert silent["multi_step_task_completion"][0] == L  # ids and dates are not figures


def test_confirmed_change_never_made_is_multi_step(tmp_path: Path):
    turns = fx.cancel_turns(fx.BUSINESS)
    turns = [t for t in turns if not (t[0] == "call" and t[1] == "cancel_reservation")]
    labels = one(tmp_path, turns)
    assert labels["multi_step_task_completion"][0] == L


# ---------------------------------------------------------------------------------------------
# defect 4 (in part): each format's own tools
# ---------------------------------------------------------------------------------------------
def test_tau_bench_think_is_one_of_its_tools(tmp_path: Path):
    record = {
        "task_id": 0, "reward": 1.0, "trial": 0,
        "info": {"task": {"user_id": "emma_kim_9957", "actions": [], "instruction": "You are Emma Kim.", "outputs": []}},
        "traj": [
            {"role": "system", "content": "# Airline policy"},
            {"role": "user", "content": "Can you check reservation BUS123?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "think", "arguments": "{\"thought\": \"look it up\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "think", "content": ""},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "get_reservation_details", "arguments": "{\"reservation_id\": \"BUS123\"}"}}]},
            {"role": "tool", "tool_call_id": "c2", "name": "get_reservation_details", "content": json.dumps(fx.BUSINESS)},
            {"role": "assistant", "content": "It is a business booking."},
        ],
    }  # fmt: skip
    (labels,) = label_file(fx.write(tmp_path / "tau-bench.json", [record]))
    assert labels["tool_calling_precision"][0] == P
    bogus = copy.deepcopy(record)
    bogus["traj"][2]["tool_calls"][0]["function"]["name"] = "ponder"
    (labels,) = label_file(fx.write(tmp_path / "tau-bench2.json", [bogus]))
    assert labels["tool_calling_precision"][0] == L and "'ponder'" in labels["tool_calling_precision"][1]


# ---------------------------------------------------------------------------------------------
# retail
# ---------------------------------------------------------------------------------------------
ORDER = {
    "order_id": "#W1234567", "user_id": "yusuf_rossi_9620", "address": {"city": "Philadelphia"},
    "items": [{"name": "Keyboard", "product_id": "1656367028", "item_id": "1151293680", "price": 272.33, "options": {}}],
    "status": "delivered", "fulfillments": [], "payment_history": [{"transaction_type": "payment", "amount": 272.33, "payment_method_id": "credit_card_9513926"}],
}  # fmt: skip


def retail(tmp_path: Path, turns: list[tuple]) -> dict:
    data = fx.results([fx.simulation("1", 0, 0.0, fx.conversation(*turns))], [fx.task("1")], domain="retail")
    (labels,) = label_file(fx.write(tmp_path / "retail.json", data))
    return labels


AUTH = [("user", "I am Yusuf Rossi, zip 19122."), ("call", "find_user_id_by_name_zip", {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}, "yusuf_rossi_9620")]


def test_retail_status_rules(tmp_path: Path):
    read = ("call", "get_order_details", {"order_id": "#W1234567"}, ORDER)
    cancel = ("call", "cancel_pending_order", {"order_id": "#W1234567", "reason": "no longer needed"}, {**ORDER, "status": "cancelled"})
    labels = retail(tmp_path, AUTH + [("user", "Cancel order #W1234567 please."), read, cancel])
    assert labels["precondition_verification"][0] == L and "'delivered'" in labels["precondition_verification"][1]
    refused = retail(tmp_path, AUTH + [("user", "I want to return my keyboard from #W1234567."), read,
                                       ("assistant", "I'm sorry, order #W1234567 cannot be returned.")])  # fmt: skip
    assert refused["precondition_verification"][0] == L and "refused to return" in refused["precondition_verification"][1]
    unauthenticated = retail(tmp_path, [("user", "Cancel order #W1234567."), read, cancel])
    assert unauthenticated["precondition_verification"][0] == L and "authenticating" in unauthenticated["precondition_verification"][1]


def test_rules_are_documented():
    docs = rule_documentation()
    assert set(docs) >= {"domain_policy", "tool_calling_precision", "required_communication", "escalation_judgment"}
    assert all(len(text) > 80 for text in docs.values())


def test_refusals_are_read_narrowly(tmp_path: Path):
    """An offer that mentions something else the agent cannot do is not a refusal of the offer; a refusal of
    "these reservations" is not pinned on whichever reservation happens to have been read."""
    from factory.analyze.conversation import refusals

    offer = "You can keep the same flights and upgrade the cabin class to business, but you cannot search for different flights."
    assert [a for a, _ in refusals(offer)] != ["change_cabin"]
    assert [a for a, _ in refusals("Upgrading a basic economy booking is not allowed.")] == ["change_cabin"]
    turns = [("user", "Cancel IFOYYZ and NQNU5R, and upgrade BUS123. My user id is emma_kim_9957."),
             ("call", "get_reservation_details", {"reservation_id": "BUS123"}, fx.BUSINESS),
             ("assistant", "About IFOYYZ and NQNU5R: unfortunately, these reservations are not eligible for cancellation."),
             ("user", "Ok ###STOP###")]  # fmt: skip
    assert one(tmp_path, turns)["precondition_verification"][0] == N


def test_a_booking_whose_flights_do_not_make_the_trip(tmp_path: Path):
    search = [{"flight_number": "HAT069", "origin": "JFK", "destination": "SEA", "status": "available", "date": None,
               "available_seats": {"basic_economy": 9, "economy": 9, "business": 9}, "prices": {"basic_economy": 51, "economy": 90, "business": 300}}]  # fmt: skip
    args = {"user_id": "emma_kim_9957", "origin": "JFK", "destination": "SEA", "flight_type": "round_trip", "cabin": "basic_economy",
            "flights": [{"flight_number": "HAT069", "date": "2024-05-20"}, {"flight_number": "HAT069", "date": "2024-05-25"}],
            "passengers": [{"first_name": "Emma", "last_name": "Kim", "dob": "1980-01-01"}],
            "payment_methods": [{"payment_id": "credit_card_1", "amount": 102}], "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no"}  # fmt: skip
    turns = [("user", "Book JFK to Seattle May 20, back May 25. My user id is emma_kim_9957."),
             ("call", "get_user_details", {"user_id": "emma_kim_9957"}, fx.USER),
             ("call", "search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}, search),
             ("call", "search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-25"}, search),
             ("assistant", "I will book HAT069 both ways. Do you confirm? Please answer yes to proceed."), ("user", "Yes, please proceed."),
             ("call", "book_reservation", args, {"reservation_id": "HATHAT"}), ("user", "Thanks ###STOP###")]  # fmt: skip
    labels = one(tmp_path, turns)
    assert labels["structured_data_reasoning"][0] == L and "do not make that trip" in labels["structured_data_reasoning"][1]


# ---------------------------------------------------------------------------------------------
# evidence, confidence, abstention
# ---------------------------------------------------------------------------------------------
def full_labels(tmp_path: Path, turns: list[tuple], name: str = "ev"):
    data = fx.results([fx.simulation("1", 0, 0.0, fx.conversation(*turns))], [fx.task("1")])
    (trajectory,) = load_trajectories([fx.write(tmp_path / f"{name}.json", data)]).trajectories
    labels = OfflineLabeler({trajectory.id: embedded_task(trajectory)}, trust=RAW).label(trajectory, list(CAPABILITIES))
    return trajectory, {l.capability: l for l in labels}


def test_a_lacking_label_points_at_the_message_and_the_values(tmp_path: Path):
    trajectory, labels = full_labels(tmp_path, fx.cancel_turns(fx.OLD_ECONOMY))
    policy = labels["precondition_verification"]
    assert policy.label == L and 0.5 <= policy.confidence <= 1.0 and not policy.abstained
    (evidence,) = policy.evidence
    assert evidence.rule == "cancel_without_ground"
    call = trajectory.messages[evidence.message_index]
    assert call.tool_calls and call.tool_calls[0].function.name == "cancel_reservation"
    assert evidence.compared["reservation"] == "OLD456" and evidence.compared["created_at"] == fx.OLD_ECONOMY["created_at"]
    assert evidence.compared["insurance"] == "no" and evidence.compared["cabin"] == "economy"


def test_unsure_findings_abstain(tmp_path: Path):
    """Insured, cancelled for a reason the user gave in words the rules do not place (a birthday): when the agent
    said nothing of the insurance the labeler abstains (NA, abstained, the finding kept as evidence); when the
    agent cancelled because of the insurance, it is LACKING."""
    insured = {**fx.OLD_ECONOMY, "insurance": "yes"}
    turns = [("user", "I want to cancel OLD456. My user id is emma_kim_9957."),
             ("call", "get_user_details", {"user_id": "emma_kim_9957"}, fx.USER),
             ("call", "get_reservation_details", {"reservation_id": "OLD456"}, insured),
             ("assistant", "What is the reason for the cancellation?"),
             ("user", "It's on my best friend's birthday."),
             ("assistant", "I will cancel OLD456. Do you confirm? Please answer yes to proceed."), ("user", "Yes, please proceed."),
             ("call", "cancel_reservation", {"reservation_id": "OLD456"}, {**insured, "status": "cancelled"}),
             ("user", "Thanks ###STOP###")]  # fmt: skip
    _, quiet = full_labels(tmp_path, turns, "quiet")
    assert quiet["precondition_verification"].label == N and quiet["precondition_verification"].abstained
    assert quiet["precondition_verification"].reason.startswith("abstained:") and quiet["precondition_verification"].evidence[0].rule == "insurance_reason_not_covered"
    cited = list(turns)
    cited[5] = ("assistant", "Since you have travel insurance, you are covered. I will cancel OLD456. Do you confirm? Please answer yes to proceed.")
    _, loud = full_labels(tmp_path, cited, "cited")
    assert loud["precondition_verification"].label == L and not loud["precondition_verification"].abstained


def test_labels_jsonl_and_the_report_carry_the_evidence(tmp_path: Path):
    from factory.analyze.pipeline import AnalyzeConfig, analyze
    from factory.analyze.report import write_outputs

    data = fx.results([fx.simulation("1", 0, 0.0, fx.conversation(*fx.cancel_turns(fx.OLD_ECONOMY))),
                       fx.simulation("2", 0, 1.0, fx.conversation(*fx.cancel_turns(fx.BUSINESS)))], [fx.task("1"), fx.task("2")])  # fmt: skip
    trajectories = load_trajectories([fx.write(tmp_path / "run.json", data)]).trajectories
    result = analyze(trajectories, AnalyzeConfig(bootstrap=0))
    paths = write_outputs(result, tmp_path / "out", charts=False, trajectories=trajectories)
    rows = [json.loads(line) for line in paths["labels"].read_text().splitlines()]
    lacking = [r for r in rows if r["label"] == "LACKING"]
    assert lacking and all(r["evidence"] and r["evidence"][0]["rule"] and "confidence" in r for r in lacking)
    report = paths["report"].read_text()
    assert "## Evidence for LACKING labels" in report and re.search(r"\| `run:1#0` \| \d+ \| cancel_without_ground \|", report)
    assert "created_at=2024-05-13T10:00:00" in report
