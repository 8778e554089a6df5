"""Task versions: ``--tasks`` never silently replaces the task a run used; revised tasks are detected and
named; τ-bench v1 records are matched to τ² tasks by content, or left unmatched with a reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factory.analyze.importers import load_trajectories
from factory.analyze.revisions import KNOWN_TAU2_REVISIONS, match_tau_bench, resolve
from factory.analyze.tasks import TaskIndex, embedded_task, load_tasks, spec_from_tau2, spec_from_tau_bench
from tests.analyze import tau2_fixtures as fx
from tests.analyze.conftest import SHARED_TAU2

CANCEL = [{"name": "cancel_reservation", "arguments": {"reservation_id": "BUS123"}}]


def run_file(tmp_path: Path, task: dict) -> Path:
    sim = fx.simulation("1", 0, 0.0, fx.conversation(*fx.cancel_turns(fx.BUSINESS)))
    return fx.write(tmp_path / "run.json", fx.results([sim], [task]))


def tasks_file(tmp_path: Path, *tasks: dict) -> Path:
    return fx.write(tmp_path / "tasks.json", list(tasks))


def test_tasks_never_replace_the_embedded_task_and_differences_are_named(tmp_path: Path):
    (t,) = load_trajectories([run_file(tmp_path, fx.task("1", actions=CANCEL))]).trajectories
    current = fx.task("1", actions=[])  # the benchmark has since corrected the gold: no cancellation
    resolution = resolve([t], load_tasks([tasks_file(tmp_path, current)]))
    assert resolution.tasks[t.id].criteria == embedded_task(t).criteria  # the run's own task is kept
    check = resolution.checks[t.id]
    assert check.status == "revised" and "gold actions differ from --tasks" in check.detail
    (note,) = [n for n in resolution.notes if "graded against gold" in n]
    assert "airline 1" in note and "not attributed to the agent when the run does what the corrected task asks" in note


def test_instruction_only_revisions_are_named_but_stay_attributed(tmp_path: Path):
    (t,) = load_trajectories([run_file(tmp_path, fx.task("1", actions=CANCEL))]).trajectories
    reworded = fx.task("1", reason="You want to cancel BUS123 (and keep everything else).", actions=CANCEL)
    resolution = resolve([t], load_tasks([tasks_file(tmp_path, reworded)]))
    assert resolution.checks[t.id].status == "instructions_revised"
    assert any("user instructions that differ from the tasks in --tasks" in n for n in resolution.notes)
    same = resolve([t], load_tasks([tasks_file(tmp_path, fx.task("1", actions=CANCEL))]))
    assert same.checks[t.id].status == "current" and not same.notes


def test_trajectories_without_a_task_take_it_from_tasks_and_check_task_version(tmp_path: Path):
    (t,) = load_trajectories([run_file(tmp_path, fx.task("1", actions=CANCEL))]).trajectories
    bare = t.model_copy(update={"metadata": {k: v for k, v in t.metadata.items() if k != "task"}})
    index = load_tasks([tasks_file(tmp_path, fx.task("1", actions=CANCEL))])
    assert resolve([bare], index).checks[bare.id].status == "supplied"
    stamped = bare.model_copy(update={"metadata": {**bare.metadata, "task_version": index.lookup("airline", "1").version}})
    assert resolve([stamped], index).checks[stamped.id].status == "current"
    stale = bare.model_copy(update={"metadata": {**bare.metadata, "task_version": "0" * 64}})
    assert resolve([stale], index).checks[stale.id].status == "revised"


def test_rollout_records_with_only_gold_actions_are_judged_by_their_task_version(tmp_path: Path):
    """`factory rollout` writes gold_actions and task_version, not the task: the version decides, and a current
    run reads the full task (instructions, communications) from --tasks."""
    (t,) = load_trajectories([run_file(tmp_path, fx.task("1", actions=CANCEL))]).trajectories
    index = load_tasks([tasks_file(tmp_path, fx.task("1", actions=CANCEL, communicate=["1000"]))])
    meta = {k: v for k, v in t.metadata.items() if k != "task"} | {"gold_actions": CANCEL}
    current = t.model_copy(update={"metadata": meta | {"task_version": index.lookup("airline", "1").version}})
    resolution = resolve([current], index)
    assert resolution.checks[current.id].status == "current" and resolution.tasks[current.id].communicate_info == ["1000"]
    stale = t.model_copy(update={"metadata": meta | {"task_version": "0" * 64}})
    check = resolve([stale], index).checks[stale.id]
    assert check.status == "instructions_revised" and check.detail.startswith("task_version differs")
    moved = t.model_copy(update={"metadata": meta | {"task_version": "0" * 64, "gold_actions": []}})
    assert resolve([moved], index).checks[moved.id].status == "revised"


@pytest.mark.skipif(not SHARED_TAU2.is_dir(), reason="real τ² data not found")
def test_known_revisions_match_the_two_released_task_files():
    """The built-in table (used without --tasks) is exactly the difference between τ²'s first release and τ³-bench 1.0.0."""
    for domain in ("airline", "retail"):
        folder = SHARED_TAU2 / domain
        current = {t["id"]: spec_from_tau2(t) for t in json.loads((folder / "tasks.json").read_text())}
        first = {t["id"]: spec_from_tau2(t) for t in json.loads((folder / "tasks_release_2025-06-10.json").read_text())}
        table = {}
        for tid, spec in current.items():
            entry = {}
            if spec.criteria != first[tid].criteria:
                entry["criteria"] = first[tid].criteria[:16]
            if spec.scenario != first[tid].scenario:
                entry["scenario"] = first[tid].scenario[:16]
            if entry:
                table[tid] = entry
        assert table == KNOWN_TAU2_REVISIONS[domain]
    assert sum("criteria" in e for e in KNOWN_TAU2_REVISIONS["airline"].values()) == 12


@pytest.mark.skipif(not SHARED_TAU2.is_dir(), reason="real τ² data not found")
def test_a_first_release_run_is_flagged_without_tasks(tmp_path: Path):
    first = {t["id"]: t for t in json.loads((SHARED_TAU2 / "airline" / "tasks_release_2025-06-10.json").read_text())}
    sim = fx.simulation("9", 0, 0.0, fx.conversation(*fx.cancel_turns(fx.BUSINESS)))
    (t,) = load_trajectories([fx.write(tmp_path / "old.json", fx.results([sim], [first["9"]]))]).trajectories
    check = resolve([t]).checks[t.id]
    assert check.status == "revised" and "corrected in τ³-bench 1.0.0" in check.detail


def _tau_bench_spec(user: str, instruction: str, actions: list[dict]) -> object:
    return spec_from_tau_bench({"user_id": user, "instruction": instruction, "actions": [{"name": a["name"], "kwargs": a["arguments"]} for a in actions]}, "0", "airline")


def test_tau_bench_records_are_matched_by_content_never_by_index():
    index = TaskIndex()
    index.add(spec_from_tau2(fx.task("0", reason="You want to book a flight to Boston.")))
    index.add(spec_from_tau2(fx.task("7", reason="You want to cancel reservation BUS123 because your plans changed.", actions=CANCEL)))
    record = _tau_bench_spec("emma_kim_9957", "You are emma_kim_9957. You want to cancel reservation BUS123 because your plans changed.", CANCEL)
    match, why = match_tau_bench(record, index)
    assert match is not None and match.id == "7" and why == ""  # τ-bench index "0" is not τ² task "0"
    index.add(spec_from_tau2(fx.task("8", reason="You want to cancel reservation BUS123 because your plans changed.", actions=CANCEL)))
    match, why = match_tau_bench(record, index)
    assert match is None and why == "ambiguous between τ² tasks 8 and 7"
    stranger = _tau_bench_spec("zed_x_1", "You are Zed. You want a refund for a lost dog.", [])
    assert match_tau_bench(stranger, index) == (None, "no τ² task with similar instructions")


@pytest.mark.skipif(not SHARED_TAU2.is_dir(), reason="real τ² data not found")
def test_tau_bench_match_on_the_real_tasks(task_files):
    """τ-bench airline task 0 is τ² task 20 (same user, same booking)."""
    record = _tau_bench_spec("mia_li_3668", "You are mia_li_3668. You want to fly from New York to Seattle on May 20 (one way). "
                             "You do not want to fly before 11am est. You want to fly in economy.", [])  # fmt: skip
    match, _ = match_tau_bench(record, load_tasks(task_files))
    assert match is not None and match.id == "20"


@pytest.mark.skipif(not SHARED_TAU2.is_dir(), reason="real τ² data not found")
def test_task_versions_agree_with_the_rollout_targets():
    """The cross-part convention: analyze's task_version is the one `factory rollout` stamps (kept separate
    only because importing env_registry would pull gymnasium into every analyze run)."""
    from env_registry.targets.tasks import task_version

    raw = json.loads((SHARED_TAU2 / "retail" / "tasks.json").read_text())
    index = load_tasks([SHARED_TAU2 / "retail" / "tasks.json"])
    for task in raw[:20]:
        assert index.lookup("retail", task["id"]).version == task_version(task)
