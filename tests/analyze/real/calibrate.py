"""Writes ``factory/analyze/rule_trust.json``: for each offline rule, how often its LACKING findings were right on
the TUNING parts of the real labelled set (tune and, once each had been scored, the first holdout and holdout2; never
holdout3), and a confidence cap just under ``ABSTAIN`` for a
rule that fired at least twice there and was wrong more often than right. Run by hand when rules change:
``python3 -m tests.analyze.real.calibrate``; ``test_analyze_real`` checks the shipped file equals a rerun."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path

from factory.analyze import offline
from factory.analyze.agreement import load_hand_labels
from factory.analyze.attribution import attribute
from factory.analyze.catalogue import canonical
from factory.analyze.evidence import ABSTAIN, LACKING
from factory.analyze.importers import load_trajectories
from factory.analyze.revisions import resolve
from tests.analyze.real.score import LABELS, current_tasks, unpacked

TARGET = Path(offline.__file__).with_name("rule_trust.json")
DISTRUSTED = round(ABSTAIN - 0.05, 2)
MIN_FIRED = 2


TUNING = ("tune", "holdout", "holdout2")
"""The first holdout and holdout2 were each scored once with the rules frozen (their figures are in git history and
the README); they have been tuning data since (holdout2 only after holdout3 had been drawn and labelled).
``holdout3`` is never read here."""


def measure(splits: tuple[str, ...] = TUNING) -> dict[str, dict[str, float]]:
    hand = load_hand_labels(LABELS)
    with tempfile.TemporaryDirectory() as tmp:
        trajectories = [t for t in load_trajectories(unpacked(Path(tmp))).trajectories if hand[t.id].split in splits]
        resolution = resolve(trajectories, current_tasks(Path(tmp)))
    labeler = offline.OfflineLabeler(resolution.tasks, trust={})
    fired: Counter[str] = Counter()
    right: Counter[str] = Counter()
    for t in trajectories:
        counted = t.success or attribute(t, resolution.tasks.get(t.id), resolution.checks.get(t.id), resolution.references.get(t.id)).attributable
        if not counted:
            continue
        seen = {(f.rule, canonical(f.capability)) for f in labeler.findings(t) if f.label == LACKING and f.confidence >= ABSTAIN}
        for rule, capability in seen:
            fired[rule] += 1
            right[rule] += capability in hand[t.id].right
    rules = {}
    for rule in sorted(fired):
        entry: dict[str, float] = {"fired": fired[rule], "right": right[rule]}
        if fired[rule] >= MIN_FIRED and right[rule] * 2 < fired[rule]:
            entry["confidence"] = DISTRUSTED
        rules[rule] = entry
    return rules


def content() -> str:
    note = (f"Measured on the tuning parts ({' and '.join(TUNING)}) of tests/analyze/real (hand-labelled real τ² trajectories) by tests/analyze/real/calibrate.py: "
            f"a rule that fired at least {MIN_FIRED} times and was right less than half the time is capped at {DISTRUSTED} (abstains).")
    return json.dumps({"_comment": note, "rules": measure()}, indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    TARGET.write_text(content(), encoding="utf-8")
    print(TARGET.read_text())
