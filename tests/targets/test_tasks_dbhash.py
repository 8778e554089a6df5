"""τ² task files load as they are (both releases), bad files get one clear error, and the DB hash is τ²'s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from env_registry.targets.dbhash import AIRLINE, RETAIL, db_hash, normalise
from env_registry.targets.errors import TargetConfigError
from env_registry.targets.tasks import Action, load_tasks, select_tasks, task_version
from tests.targets.helpers import TAU2, shared_json


@pytest.mark.parametrize("domain,count", [("airline", 50), ("retail", 114)])
@pytest.mark.parametrize("name", ["tasks.json", "tasks_release_2025-06-10.json"])
def test_real_task_files_load_with_their_reward_basis(domain: str, count: int, name: str) -> None:
    tasks = load_tasks(TAU2 / domain / name)
    assert len(tasks) == count
    raw = shared_json(domain, name)
    assert [t.version for t in tasks] == [task_version(item) for item in raw]
    for task, item in zip(tasks, raw):
        expected = item["evaluation_criteria"].get("reward_basis") or ["DB", "COMMUNICATE"]  # τ²'s default when absent
        assert task.reward_basis == expected
        assert [a.name for a in task.gold_actions] == [a["name"] for a in item["evaluation_criteria"]["actions"]]
        assert task.domain == domain


def test_task_version_changes_with_any_field(tmp_path: Path) -> None:
    raw = shared_json("airline", "tasks.json")[:2]
    before = load_tasks(_write(tmp_path / "a.json", raw))
    raw[1]["user_scenario"]["instructions"]["known_info"] += "."
    after = load_tasks(_write(tmp_path / "b.json", raw))
    assert before[0].version == after[0].version and before[1].version != after[1].version


def _write(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "no such task file"),
        ("{not json", "not valid JSON"),
        ('{"a": 1}', "expected a JSON list of τ² tasks"),
        ("[]", "holds no tasks"),
        ('[{"id": "1"}]', "task 1: user_scenario"),
        ('[{"id": "1", "user_scenario": {"instructions": "x"}}, {"id": "1", "user_scenario": {"instructions": "y"}}]', "appears twice"),
    ],
)
def test_bad_task_files_name_the_problem(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "tasks.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(TargetConfigError, match=message) as caught:
        load_tasks(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_select_tasks_keeps_order_and_names_unknown_ids() -> None:
    tasks = load_tasks(TAU2 / "airline" / "tasks.json")
    assert [t.id for t in select_tasks(tasks, ["7", "3", "7"])] == ["7", "3"]
    with pytest.raises(TargetConfigError, match=r"unknown task id\(s\) '999'; known ids: 0, 1"):
        select_tasks(tasks, ["3", "999"])


def test_action_matching_follows_compare_args() -> None:
    action = Action(name="get_user_details", arguments={"user_id": "a", "extra": 1}, compare_args=["user_id"])
    assert action.matches("get_user_details", {"user_id": "a", "extra": 2})
    assert not action.matches("get_user_details", {"user_id": "b"})
    assert not action.matches("cancel_reservation", {"user_id": "a"})
    every = Action(name="t", arguments={"x": 1})
    assert every.matches("t", {"x": 1}) and not every.matches("t", {"x": 1, "y": 2})


@pytest.mark.parametrize("domain,shape", [("airline", AIRLINE), ("retail", RETAIL)])
def test_initial_db_hash_is_tau2s(domain: str, shape) -> None:
    db = shared_json(domain, "db.json")
    assert db_hash(db, shape) == shared_json(domain, "tool_meta.json")["initial_db_hash"]
    assert db_hash(db) != db_hash(db, shape)  # without filling τ²'s optional fields the hash differs


def test_numbers_are_coerced_to_the_declared_type() -> None:
    db = {
        "users": {"u": {"payment_methods": {"c": {"source": "certificate", "amount": 50}, "cc": {"source": "credit_card"}}}},
        "reservations": {"r": {"payment_history": [{"amount": 50.0}], "flights": [{"price": 10.5}], "total_baggages": True}},
        "flights": {},
    }
    out = normalise(db, AIRLINE)
    methods = out["users"]["u"]["payment_methods"]
    assert methods["c"]["amount"] == 50.0 and isinstance(methods["c"]["amount"], float)
    assert "amount" not in methods["cc"]  # absent stays absent; only declared optional fields are filled
    reservation = out["reservations"]["r"]
    assert reservation["payment_history"][0]["amount"] == 50 and isinstance(reservation["payment_history"][0]["amount"], int)
    assert reservation["flights"][0]["price"] == 10.5  # a fractional int field is left to differ, as τ² would reject it
    assert reservation["total_baggages"] is True and reservation["status"] is None
    assert db["users"]["u"]["payment_methods"]["c"]["amount"] == 50  # the input is not modified
    assert db_hash({"users": {"u": {"payment_methods": {"c": {"amount": 50}}}}}, AIRLINE) == db_hash(
        {"users": {"u": {"payment_methods": {"c": {"amount": 50.0}}}}}, AIRLINE
    )
