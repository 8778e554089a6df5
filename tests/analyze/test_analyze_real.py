"""The offline labeler on real agents' trajectories: 204 τ²-bench airline and retail runs of published agents
(``tests/analyze/real``: MIT-licensed data from sierra-research/tau2-bench), each read by hand against the policy and
the task's gold: the outcome, whose fault a failure is, and the capabilities the agent lacked, with a reason each.

The set was drawn and split by fixed seeds before any rule ran on it: tune (82) and a first holdout (41); after that
holdout had been scored, ``holdout2`` (41); after holdout2 had been scored, ``holdout3`` (40: a second GPT-5.4
ironforge run and two adaptive-agent Claude Opus 4.6 submissions never used before, unused runs of GPT-4o,
gpt-oss-120b, GPT-5.4, Claude Opus 4.6, Claude Sonnet 4.6 and DeepSeek, retail successes), each labelled and
committed before any rule ran on it. Each holdout was scored once with the rules frozen and became tuning data
only once the next one existed: ``rule_trust.json`` is calibrated on tune, holdout and holdout2
(``measured.json`` holds every part's figures):

- tune: 20/28 agent-caused failures with a right label (recall 0.71), 24/27 LACKING labels right (precision 0.89),
  18/19 other failures spared, 2/35 successes blamed;
- first holdout (scored frozen at 5/10, 8/11): now 6/10, 10/12, 13/14 spared, 0/17 blamed;
- holdout2 (scored frozen at 8/17, 11/14, 9/9, 2/15): now 15/17, 19/21, 9/9, 2/15;
- holdout3, scored once with the rules frozen: 7/17 (recall 0.41), 9/18 (precision 0.50), 7/8 other failures
  spared, 3/15 successes blamed (the rules before the holdout2 tuning: 7/17, 9/16, 7/8, 2/15). After that score the
  synthetic suite (``test_analyze_offline``) caught ``payment_nobody_named`` firing on careful replays of the gold;
  narrowing it (the user's instructions must show a wish for another kind of method) gives 7/17, 9/17 (0.53), 7/8,
  3/15, the figures below and in ``measured.json``.

holdout3 meets the issue's bar on failures that are not the agent's (at least 8 of every 11 spared) and misses the
bars on recall (0.70), precision (0.80) and successes (at most 2 of every 15 blamed): those tests are strict xfails
that say so, and turn into failures the day the figures reach the bars, so this docstring and the figures must then
be updated. The rules written from the tuning parts did not carry to holdout3: what real agents get wrong varies
more than 164 trajectories show.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factory.analyze.agreement import load_hand_labels, measured
from factory.analyze.catalogue import ALIASES, builtin_names
from factory.analyze.offline import RULE_NAMES
from schemas.capability import CapabilityLabel, CapabilityReport
from tests.analyze.real import calibrate, measure
from tests.analyze.real.score import DATA, LABELS, SPLIT, run

RECALL_BAR, PRECISION_BAR = 0.70, 0.80
SPARED_BAR, BLAMED_BAR = 8 / 11, 2 / 15


def _readable() -> str | None:
    """Why the stored set cannot be read, or None."""
    try:
        files = sorted(DATA.glob("*.json.gz"))
        if not files:
            return f"no stored trajectories under {DATA}"
        with gzip.open(files[0], "rt", encoding="utf-8") as fh:
            json.load(fh)
        LABELS.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        return f"the real labelled set cannot be read ({exc})"
    return None


@pytest.fixture(scope="module")
def scored():
    why = _readable()
    if why:
        pytest.skip(why)
    return run()


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    why = _readable()
    if why:
        pytest.skip(why)
    return [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_set_is_real_labelled_by_hand_and_split_before_tuning(rows):
    agents = Counter(r["agent"] for r in rows)
    assert len(rows) >= 200 and len(agents) >= 4 and {r["domain"] for r in rows} == {"airline", "retail"}
    split = json.loads(SPLIT.read_text())
    assert {r["id"]: r["split"] for r in rows} == split
    assert Counter(split.values())["holdout"] >= 40 and Counter(split.values())["holdout2"] >= 40 and Counter(split.values())["holdout3"] >= 40
    fresh = [r for r in rows if r["split"] == "holdout2"]
    assert len({r["agent"] for r in fresh}) >= 4 and {r["domain"] for r in fresh} == {"airline", "retail"}
    old_sources = {r["id"].split(":")[0] for r in rows if r["split"] in ("tune", "holdout")}
    assert sum(r["id"].split(":")[0] not in old_sources for r in fresh) >= len(fresh) * 3 // 4  # mostly sources never used before
    newest = [r for r in rows if r["split"] == "holdout3"]
    assert len({r["agent"] for r in newest}) >= 4 and {r["domain"] for r in newest} == {"airline", "retail"}
    before = {r["id"].split(":")[0] for r in rows if r["split"] != "holdout3"}
    assert len({r["id"].split(":")[0] for r in newest} - before) >= 3  # every source τ² still had unused (the rest: unused runs of used ones)
    catalogue = set(builtin_names())
    for r in rows:
        assert r["outcome"] in ("success", "failure") and r["cause"] in ("agent", "user_simulator", "task", "none"), r["id"]
        assert (r["outcome"] == "failure") == (r["reward"] < 1 - 1e-6), r["id"]
        assert set(r["lacking"]) | set(r["also"]) <= catalogue, r["id"]  # catalogue names only
        assert len(r["note"]) > 30, r["id"]
        if r["cause"] == "agent":
            assert r["lacking"] and all(len(reason) > 30 for reason in r["lacking"].values()), r["id"]
        elif r["outcome"] == "failure":
            assert not r["lacking"], r["id"]  # a failure that is not the agent's is not blamed on a capability
    assert {"agent", "user_simulator", "task"} <= {r["cause"] for r in rows}


def test_labels_use_only_catalogue_names(scored):
    """A rule may file a finding under a declared alias; every label carries a catalogue name."""
    catalogue = set(builtin_names())
    assert set(ALIASES) == {"policy_application"} and set(ALIASES.values()) <= catalogue
    assert {ALIASES.get(n, n) for n in RULE_NAMES} <= catalogue
    assert {label.capability for label in scored.result.labels[0]} <= catalogue
    assert {f.name for f in scored.result.report.candidates} <= catalogue


def test_shipped_figures_equal_a_recomputation():
    """measured.json (what every offline report states) and rule_trust.json are what the scripts compute now."""
    why = _readable()
    if why:
        pytest.skip(why)
    assert measure.TARGET.read_text(encoding="utf-8") == measure.content(), "run python3 -m tests.analyze.real.measure"
    assert calibrate.TARGET.read_text(encoding="utf-8") == calibrate.content(), "run python3 -m tests.analyze.real.calibrate"
    assert measured() == json.loads(measure.TARGET.read_text(encoding="utf-8"))


HOLDOUT = "holdout3"
"""The freshest holdout: no rule was written or calibrated with it."""


def test_failures_that_are_not_the_agents_are_spared_on_the_holdout(scored):
    """holdout3 has 8 failures that are not the agent's (the draw gave no more): the bar is the ratio."""
    f = scored.figures(HOLDOUT)
    assert f.other_failures >= 8 and f.spared / f.other_failures >= SPARED_BAR, f.unspared


@pytest.mark.xfail(strict=True, reason="holdout3 blames 3 of 15 successes (0.20), above the issue's bar of 2 per 15; see measured.json")
def test_successes_are_not_blamed_on_the_holdout(scored):
    f = scored.figures(HOLDOUT)
    assert f.successes >= 15 and f.blamed / f.successes <= BLAMED_BAR, f.wrong


@pytest.mark.xfail(strict=True, reason="holdout3 recall 0.41 (7/17) is below the issue's bar of 0.70; see measured.json")
def test_recall_on_the_holdout_reaches_the_bar(scored):
    f = scored.figures(HOLDOUT)
    assert f.recall >= RECALL_BAR, f.misses


@pytest.mark.xfail(strict=True, reason="holdout3 precision 0.53 (9/17; 0.50 when scored frozen) is below the issue's bar of 0.80; see measured.json")
def test_precision_on_the_holdout_reaches_the_bar(scored):
    f = scored.figures(HOLDOUT)
    assert f.precision >= PRECISION_BAR, f.wrong


def test_tuning_figures_hold(scored):
    """The parts the rules were developed on (tune, and the first holdout and holdout2 since each was scored) stay
    where they are (a regression guard, not a claim)."""
    f = scored.figures("tune")
    assert f.recall >= 0.70 and f.precision >= 0.85 and f.spared >= 18 and f.blamed <= 2, f.line()
    f = scored.figures("holdout")
    assert f.recall >= 0.60 and f.precision >= 0.80 and f.spared >= 13 and f.blamed == 0, f.line()
    f = scored.figures("holdout2")
    assert f.recall >= 0.85 and f.precision >= 0.85 and f.spared >= 9 and f.blamed <= 2, f.line()


def test_the_report_states_the_measured_floor_and_labels_agreement(tmp_path: Path, rows):
    """Offline reports carry measured.json's figures; --labels scores a run against a hand-labels file (the same
    figures an --llm run gets); a bad labels file is one line and exit 2."""
    from factory.cli import app

    for gz in sorted(DATA.glob("retail_*.json.gz")):
        (tmp_path / gz.name.removesuffix(".gz")).write_bytes(gzip.decompress(gz.read_bytes()))
    files = [str(p) for p in sorted(tmp_path.glob("retail_*.json"))]
    runner = CliRunner()
    plain = runner.invoke(app, ["analyze", *files, "--out", str(tmp_path / "a"), "--bootstrap", "0"])
    assert plain.exit_code == 0, plain.output
    report = CapabilityReport.model_validate_json((tmp_path / "a" / "capabilities.json").read_text())
    holdout = measured()["figures"][HOLDOUT]  # the freshest holdout is the floor a report states
    assert report.agreement["source"] == "measured" and report.agreement["holdout"] == holdout
    assert f"recall {holdout['recall']:.2f}" in " ".join(plain.output.split())
    assert "## Labeler agreement" in (tmp_path / "a" / "report.md").read_text()

    scored_run = runner.invoke(app, ["analyze", *files, "--out", str(tmp_path / "b"), "--bootstrap", "0", "--labels", str(LABELS)])
    assert scored_run.exit_code == 0, scored_run.output
    mine = CapabilityReport.model_validate_json((tmp_path / "b" / "capabilities.json").read_text()).agreement
    retail = [r for r in rows if r["domain"] == "retail"]
    assert mine["source"] == str(LABELS) and mine["figures"]["labelled"] == len(retail)
    assert mine["figures"]["agent_failures"] == sum(r["cause"] == "agent" for r in retail)
    assert "agreement with the hand labels" in " ".join(scored_run.output.split())

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    broken = runner.invoke(app, ["analyze", *files, "--out", str(tmp_path / "c"), "--labels", str(bad)])
    assert broken.exit_code == 2 and "bad.jsonl:1: not a hand label" in broken.output and "Traceback" not in broken.output


def test_hand_labels_file_is_read_as_the_report_reads_it():
    why = _readable()
    if why:
        pytest.skip(why)
    hand = load_hand_labels(LABELS)
    assert len(hand) >= 120 and all(h.right >= set(h.lacking) for h in hand.values())
    assert {h.split for h in hand.values()} == {"tune", "holdout", "holdout2", "holdout3"}


RULE_CASES = [
    ("airline_gpt-4o:17#0", "basic_economy_cabin_change_refused", True),  # "basic economy cannot be modified", asked to upgrade
    ("airline_grok-3:14#0", "basic_economy_cabin_change_refused", False),  # the user wanted other flights too: that refusal is right
    ("airline_gpt-5.4:32#0", "basic_economy_flights_changed_with_upgrade", True),
    ("retail_gpt-4.1-sft:111#0", "pending_swap_error_not_recovered", True),
    ("retail_gpt-4.1:86#0", "pending_swap_not_offered", True),
    ("airline_gpt-4.1:44#0", "durations_said_unavailable", True),
    ("airline_claude-opus-4-6:23#0", "cancelled_not_rebooked", True),
    ("airline_gpt-4.1:19#0", "cancelled_not_rebooked", False),  # "I would rather rebook later"
    ("airline_gpt-oss-120b:21#0", "value_seen_nowhere", False),  # ids read by an earlier call of a merged batch
    ("airline_gpt-4o:10#0", "charge_differs_from_quote", True),  # quoted $495 for the changed legs, charged $1302 for the whole trip
    ("airline_o3:44#0", "charge_differs_from_quote", False),  # three upgrades, each charged as quoted
    # written after holdout2 became tuning data (holdout3 drawn and labelled first)
    ("airline_claude-opus-4-6-ironshell:35#0", "bags_the_user_declined", True),  # "I don't need ... any extra baggage", booked 2 bags
    ("airline_o3:35#0", "bags_the_user_declined", False),  # "won't need any extra checked bags - just the free allowance"
    ("airline_gpt-4.1-sft:22#0", "payment_nobody_named", True),  # charged a credit card no one had named
    ("airline_whissle:10#0", "payment_nobody_named", False),  # the method that paid for the reservation
    ("airline_grok-3:23#0", "separate_reservations_refused", True),
    ("airline_whissle:33#0", "transfer_of_found_change", True),  # laid out HAT072/HAT278, transferred over a fee dispute
    ("airline_grok-3:33#0", "transfer_of_found_change", False),  # the user had brought up a supervisor
    ("airline_whissle:16#0", "not_the_cheapest", True),
    ("airline_claude-sonnet-4-6:14#0", "24h_window_misjudged", True),  # the 24-hour claim sits in another sentence
    ("airline_claude-sonnet-4-6:14#0", "allowed_cabin_change_refused", False),  # the user wanted new flights too
    ("airline_o3:39#0", "cancel_without_reason", False),  # asked in French ("la raison")
]


@pytest.mark.parametrize(("tid", "rule", "fires"), RULE_CASES)
def test_rules_written_from_real_failures(scored, tid, rule, fires):
    """Each rule added for issue 34, on the tuning trajectory that motivated it (and one it must leave alone)."""
    from factory.analyze.offline import OfflineLabeler

    trajectory = scored.trajectories[tid]
    assert json.loads(SPLIT.read_text())[tid] in ("tune", "holdout", "holdout2")  # tuning parts only, never the freshest holdout
    findings = OfflineLabeler(scored.result.resolution.tasks, trust={}).findings(trajectory)
    assert any(f.rule == rule and f.label == CapabilityLabel.LACKING for f in findings) is fires, [(f.rule, f.reason) for f in findings if f.label == CapabilityLabel.LACKING]
