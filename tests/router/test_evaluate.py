"""Scoring routes against analyze's labels: majority over runs, several acceptable capabilities, and the
failures that lack no menu capability."""

from __future__ import annotations

import pytest

from router.decide import Router
from router.evaluate import evaluate_routing
from router.schema import NO_ADAPTER, RouterConfig
from schemas.capability import CapabilityLabel, TrajectoryLabel
from schemas.messages import Message
from schemas.trajectory import Trajectory

A, B, C = "precondition_verification", "permission_error_recovery", "multi_step_task_completion"


def trajectory(tid: str, text: str, success: bool = False) -> Trajectory:
    messages = [Message(role="user", content=text), Message(role="assistant", content="ok")]
    return Trajectory(id=tid, target="tau2-airline", task_id=tid.split("#")[0], messages=messages, reward=float(success), success=success)


def lacking(tid: str, capability: str, runs_lacking: int, runs: int = 3) -> list[list[TrajectoryLabel]]:
    return [
        [TrajectoryLabel(trajectory_id=tid, capability=capability, label=CapabilityLabel.LACKING if r < runs_lacking else CapabilityLabel.PRESENT)]
        for r in range(runs)
    ]


def merge(*parts: list[list[TrajectoryLabel]]) -> list[list[TrajectoryLabel]]:
    return [sum((p[r] for p in parts), []) for r in range(len(parts[0]))]


def test_accuracy_counts_any_lacking_capability_and_the_majority_rule(plain_model, tokenizer, menu) -> None:
    router = Router(plain_model, tokenizer, menu, RouterConfig(alphabet=["1", "2", "3", "4"]))  # "1" -> A wins
    assert router.route("Please cancel my booking.").choice == A
    trajectories = [
        trajectory("t1#0", "Please cancel my booking."),  # lacks A and C: routing to A is right
        trajectory("t2#0", "Please cancel my flight."),  # lacks only B: routing to A is wrong
        trajectory("t3#0", "Please cancel my trip."),  # C lacking in 1 of 3 runs only: not lacking
        trajectory("t4#0", "Please cancel my seat.", success=True),  # successes are not scored
        trajectory("t5#0", "Not labeled at all."),  # no labels: not part of the analysis
    ]
    runs = merge(lacking("t1#0", A, 2), lacking("t1#0", C, 3), lacking("t2#0", B, 3), lacking("t3#0", C, 1), lacking("t4#0", A, 0))
    report = evaluate_routing(router, trajectories, runs)
    assert [(i.trajectory_id, i.expected, i.choice, i.correct) for i in report.items] == [
        ("t1#0", [C, A], A, True),  # most often lacking first
        ("t2#0", [B], A, False),
    ]
    assert report.n_failures == 3 and report.n_unlabeled == 1 and report.n_evaluated == 2
    assert report.correct == 1 and report.accuracy == 0.5 and report.majority_baseline == 0.5
    keys = report.confusion.keys
    assert report.confusion.counts[keys.index(A)][keys.index(A)] == 1  # right: on the diagonal of the choice
    assert report.confusion.counts[keys.index(B)][keys.index(A)] == 1  # wrong: row of the expected one
    with_base = evaluate_routing(router, trajectories, runs, unlabeled="base")
    assert with_base.items[-1].expected == [NO_ADAPTER] and not with_base.items[-1].correct and with_base.n_evaluated == 3


def test_labels_for_other_trajectories_are_refused(plain_model, tokenizer, menu) -> None:
    from router.errors import RouterError

    router = Router(plain_model, tokenizer, menu)
    with pytest.raises(RouterError, match="none of the 1 trajectories has labels"):
        evaluate_routing(router, [trajectory("x#0", "hi")], lacking("y#0", A, 1, runs=1))
