"""Failures that are not the agent's fault are reported with their cause and left out of D− unless asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from factory.analyze.attribution import attribute
from factory.analyze.importers import load_trajectories
from factory.analyze.pipeline import AnalyzeConfig, analyze
from factory.analyze.revisions import TaskCheck
from factory.analyze.tasks import embedded_task, load_tasks
from tests.analyze import tau2_fixtures as fx


def load(tmp_path: Path, *turn_lists: list[tuple], termination: str = "user_stop", name: str = "run"):
    sims = [fx.simulation(str(i), 0, 0.0, fx.conversation(*turns), termination) for i, turns in enumerate(turn_lists)]
    tasks = [fx.task(str(i)) for i in range(len(turn_lists))]
    return load_trajectories([fx.write(tmp_path / f"{name}.json", fx.results(sims, tasks))]).trajectories


def cause(t, check: TaskCheck | None = None) -> str:
    return attribute(t, embedded_task(t), check).cause


def test_user_simulator_that_ends_the_episode_while_asking_the_agent_to_act(tmp_path: Path):
    turns = fx.cancel_turns(fx.BUSINESS, cancel=False)[:-1] + [
        ("assistant", "I will cancel BUS123. Do you confirm? Please answer yes to proceed."),
        ("user", "Yes, please go ahead and cancel it. ###STOP###"),
    ]  # fmt: skip
    (t,) = load(tmp_path, turns)
    a = attribute(t, embedded_task(t), None)
    assert (a.attributable, a.cause) == (False, "user_simulator") and "ended the episode in the same message" in a.detail
    declined = turns[:-1] + [("user", "No, I won't go ahead after all. ###STOP###")]
    transfer = turns[:-1] + [("user", "Yes, please transfer me to a human agent. ###STOP###")]
    (t2, t3) = load(tmp_path, declined, transfer, name="other")
    assert cause(t2) == "agent" and cause(t3) == "agent"


def test_user_simulator_that_invents_an_id(tmp_path: Path):
    turns = [("user", "Cancel reservation ZZ9Z99 please, my user id is emma_kim_9957."),
             ("call", "get_reservation_details", {"reservation_id": "ZZ9Z99"}, "Error: Reservation ZZ9Z99 not found", True),
             ("assistant", "I could not find it."), ("user", "Ok. ###STOP###")]  # fmt: skip
    (t,) = load(tmp_path, turns)
    a = attribute(t, embedded_task(t), None)
    assert a.cause == "user_simulator" and "'ZZ9Z99'" in a.detail
    named = [("user", "Cancel reservation BUS123 please, my user id is emma_kim_9957.")] + turns[1:]
    (t2,) = load(tmp_path, named, name="named")
    assert cause(t2) == "agent"  # BUS123 is in the user's instructions
    assert attribute(t, None, None).cause == "agent"  # without the task's instructions nothing is claimed


def test_infrastructure_max_steps_and_revised_tasks(tmp_path: Path):
    plain = fx.cancel_turns(fx.OLD_ECONOMY)
    (t,) = load(tmp_path, plain)
    assert cause(t) == "agent"
    infra = t.model_copy(update={"metadata": {**t.metadata, "infrastructure_error": "MCP server died (exit 137)"}})
    assert attribute(infra, None, None).model_dump() == {"attributable": False, "cause": "infrastructure", "detail": "MCP server died (exit 137)"}
    # `factory rollout`'s own crash, and its simulated user's failure, as its trajectories record them
    internal = t.model_copy(update={"metadata": {**t.metadata, "termination_reason": "internal_error", "internal_error": "KeyError: 'x' (at engine.py:9)"}})
    assert attribute(internal, None, None).model_dump() == {"attributable": False, "cause": "infrastructure", "detail": "rollout internal error: KeyError: 'x' (at engine.py:9)"}
    sim = t.model_copy(update={"metadata": {**t.metadata, "termination_reason": "user_error", "infrastructure_error": "user LLM returned nothing"}})
    assert attribute(sim, None, None).cause == "user_simulator"
    (steps,) = load(tmp_path, plain, termination="max_steps", name="steps")
    assert cause(steps) == "max_steps"
    looping = plain[:2] + [plain[1]]  # the same read twice: an agent loop, its own fault
    (loop,) = load(tmp_path, looping, termination="max_steps", name="loop")
    assert cause(loop) == "agent"
    (user_error,) = load(tmp_path, plain, termination="user_error", name="usererr")
    assert cause(user_error) == "user_simulator"
    assert cause(t, TaskCheck(status="revised", detail="gold actions differ from --tasks")) == "task_revised"


def test_statistics_leave_unattributable_failures_out_unless_included(tmp_path: Path):
    run = fx.results(
        [fx.simulation("0", 0, 1.0, fx.conversation(*fx.cancel_turns(fx.BUSINESS))),
         fx.simulation("1", 0, 0.0, fx.conversation(*fx.cancel_turns(fx.OLD_ECONOMY))),
         fx.simulation("2", 0, 0.0, fx.conversation(*fx.cancel_turns(fx.OLD_ECONOMY)))],
        [fx.task("0", actions=[{"name": "cancel_reservation", "arguments": {"reservation_id": "BUS123"}}]),
         fx.task("1", actions=[]), fx.task("2", actions=[])],
    )  # fmt: skip
    trajectories = load_trajectories([fx.write(tmp_path / "run.json", run)]).trajectories
    current = [fx.task("0", actions=[{"name": "cancel_reservation", "arguments": {"reservation_id": "BUS123"}}]), fx.task("1", actions=[]),
               fx.task("2", actions=[{"name": "cancel_reservation", "arguments": {"reservation_id": "OLD456"}}])]  # fmt: skip
    tasks = load_tasks([fx.write(tmp_path / "tasks.json", current)])
    result = analyze(trajectories, AnalyzeConfig(bootstrap=0), tasks=tasks)
    report = result.report
    assert (report.n_failures, report.n_unattributable, report.unattributable) == (1, 1, {"task_revised": 1})
    assert any("1 of 2 failures are not attributable" in n for n in report.notes)
    policy = next(f for f in report.candidates if f.name == "precondition_verification").stats
    assert policy.n_failure_labeled == 1
    assert policy.coverage == pytest.approx(0.85)  # the one counted failure, weighed by its label's confidence (a policy finding: 0.85)
    included = analyze(trajectories, AnalyzeConfig(bootstrap=0, include_unattributable=True), tasks=tasks).report
    assert (included.n_failures, included.n_unattributable, included.include_unattributable) == (2, 1, True)


def test_a_revised_task_the_run_also_misses_stays_the_agents_failure(tmp_path: Path):
    """The corrected task cancels OLD456; a run that cancelled BUS123 instead fails the corrected task as well."""
    run = fx.results([fx.simulation("2", 0, 0.0, fx.conversation(*fx.cancel_turns(fx.BUSINESS)))], [fx.task("2", actions=[])])
    (t,) = load_trajectories([fx.write(tmp_path / "run.json", run)]).trajectories
    corrected = [fx.task("2", actions=[{"name": "cancel_reservation", "arguments": {"reservation_id": "OLD456"}}])]
    tasks = load_tasks([fx.write(tmp_path / "tasks.json", corrected)])
    a = analyze([t], AnalyzeConfig(bootstrap=0), tasks=tasks).attributions[t.id]
    assert (a.attributable, a.cause) == (True, "agent") and "misses the corrected task too" in a.detail
    right = [fx.task("2", actions=[{"name": "cancel_reservation", "arguments": {"reservation_id": "BUS123"}}])]
    a = analyze([t], AnalyzeConfig(bootstrap=0), tasks=load_tasks([fx.write(tmp_path / "t2.json", right)])).attributions[t.id]
    assert (a.attributable, a.cause) == (False, "task_revised") and "does what the corrected task asks" in a.detail


def test_user_simulator_that_invents_a_date_of_birth(tmp_path: Path):
    turns = [("user", "Book me a flight to Seattle. My user id is emma_kim_9957."),
             ("assistant", "What is the passenger's date of birth?"), ("user", "My date of birth is March 15, 1990."),
             ("assistant", "Thanks."), ("user", "Bye ###STOP###")]  # fmt: skip
    (t,) = load(tmp_path, turns)
    a = attribute(t, embedded_task(t), None)
    assert a.cause == "user_simulator" and "1990-03-15" in a.detail
