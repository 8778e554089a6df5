"""The offline labeler against a hand-labelled set of τ² airline and retail trajectories (``handlabelled/``).

Each case is a conversation on a real task, answered by the real database, graded for real, and labelled by
hand with reasons before the rules were tuned. Three parts:

- ``tune`` (42): the rules were developed on these;
- ``holdout`` (34): scored first after the rules were written: 17/22 agent-caused failures found, 19/22
  LACKING labels right, 4/4 other failures spared, 1/8 successes blamed; the five general bugs that showed
  (a sum list read as a multiplication, a card's digits after the match, "booking" the noun read as a
  proposal, a bag count read as an allowance, a blanket request outliving a named list) were then fixed;
- ``fresh`` (12): written after the rules were frozen and scored once: 6/9 found, 6/7 right, 0/3 blamed; the
  one wrong label (an itinerary arrow read as a listed change) was then fixed. Its three misses are kinds no
  rule looks for: the wrong one of several records, a conditional request ("if it's returned, also cancel the
  charger"), the wrong one of two items.

Figures now (the issue's bars: at least 70% of agent-caused failures with a right label, at least 80% of
LACKING labels right, failures that are not the agent's spared, successes not blamed):

- all 88: 44/52 agent-caused failures with a right label (0.85), 48/48 LACKING labels right (1.00), 8/8 other
  failures spared, 0/28 successes blamed;
- tune 20/21 and 23/23; holdout 18/22 and 19/19; fresh 6/9 (0.67, below the bar on its own) and 6/6.

Before issue 34 the figures were 0.92 and 0.98 (holdout 21/22): three rules that were wrong more often than right on
real agents' trajectories (``tests/analyze/real``, ``rule_trust.json``) now abstain, and three of these team-written
cases (a forgotten confirmed change, two misquoted totals) lose their label with them. Since the real set's first
holdout became tuning data, the rule that judges an allowance stated without reading the membership (wrong 2 of 3
times on real trajectories) abstains too, and ``air-05-trusts-gold-claim`` loses its label (holdout 19/22 -> 18/22).
"""

from __future__ import annotations

import pytest

from tests.analyze.conftest import SHARED_TAU2
from tests.analyze.handlabelled.dsl import Domains, build
from tests.analyze.handlabelled.score import ALL_CASES, Figures, figures, run

RECALL_BAR, PRECISION_BAR = 0.70, 0.80


@pytest.fixture(scope="module")
def scored():
    if not SHARED_TAU2.is_dir():
        pytest.skip(f"real τ² data not found at {SHARED_TAU2}")
    return run(SHARED_TAU2)


def test_every_conversation_gets_the_outcome_it_claims(scored):
    """The hand labels rest on real outcomes: each case's calls, answered by the real database, reach (or miss)
    the task's gold end state and required facts as the case says."""
    wrong = [(b.case.id, b.case.expect, b.checks) for b in scored.built if (b.reward == 1.0) != (b.case.expect == "success")]
    assert not wrong
    kinds = {(b.case.expect, b.case.cause) for b in scored.built}
    assert {("failure", "agent"), ("failure", "user_simulator"), ("failure", "task_revised"), ("failure", "infrastructure"), ("success", "agent")} <= kinds
    assert {b.case.domain for b in scored.built} == {"airline", "retail"}


def test_grading_by_changed_records_agrees_with_the_gold_hashes(scored):
    """The fast grading (records either run changed, normalised) decides what τ²'s DB hash decides: checked
    against the published gold hashes on a success and a failure of each domain."""
    domains = Domains(SHARED_TAU2)
    picked = [next(b for b in scored.built if b.case.domain == d and (b.reward == 1.0) is s) for d in ("airline", "retail") for s in (True, False)]
    for built in picked:
        assert build(built.case, domains, full_hash=True).checks["db"] == built.checks["db"], built.case.id


def _check(f: Figures, name: str, recall: float, precision: float) -> None:
    print(f.line(name))
    assert f.recall >= recall, f.misses
    assert f.precision >= precision, f.wrong
    assert f.spared == f.other_failures, f.unspared
    assert f.blamed == 0, f.wrong


def test_figures_on_the_whole_set(scored):
    """The issue's bars, on every case."""
    f = figures(scored)
    _check(f, "all", RECALL_BAR, PRECISION_BAR)
    assert f.agent_failures >= 50 and f.successes >= 25 and f.other_failures >= 8


@pytest.mark.parametrize(("split", "recall", "precision"), [("tune", 0.95, 0.95), ("holdout", 0.8, 0.9), ("fresh", 0.6, 0.8)])
def test_figures_on_each_part(scored, split, recall, precision):
    """Each part just under its figure today (see the module docstring): the fresh part, scored once with the rules
    frozen, is below the issue's recall bar on its own, and says so."""
    _check(figures(scored, split), split, recall, precision)


def test_every_lacking_label_carries_its_evidence(scored):
    for labels in scored.labels.values():
        for label in labels:
            if label.label.value == "LACKING":
                assert label.evidence and label.evidence[0].rule, label
                assert label.evidence[0].message_index is not None or label.evidence[0].compared, label
                assert 0.5 <= label.confidence <= 1.0


def test_the_set_is_labelled_by_hand_with_reasons():
    for case in ALL_CASES:
        assert case.split in ("tune", "holdout", "fresh")
        if case.expect == "failure" and case.cause == "agent":
            assert case.lacking and all(len(reason) > 30 for reason in case.lacking.values()), case.id
        if case.cause != "agent":
            assert not case.lacking and (case.note or case.termination != "user_stop"), case.id
