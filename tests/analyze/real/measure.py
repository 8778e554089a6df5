"""Writes ``factory/analyze/measured.json``: the offline labeler's agreement with the hand labels of the real
labelled set, on its tune part, its first holdout and ``holdout2`` (each tuning data since it was scored),
``holdout3`` (drawn and labelled after holdout2 had been scored, scored once with the rules frozen) and all of it. Run at release (after ``calibrate``):
``python3 -m tests.analyze.real.measure``; ``test_analyze_real`` checks the shipped file equals a rerun."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from factory.analyze import agreement as agreement_module
from factory.analyze.agreement import load_hand_labels
from tests.analyze.real.score import LABELS, run

TARGET = Path(agreement_module.__file__).with_name("measured.json")
SET_NAME = "tests/analyze/real: real τ²-bench airline and retail trajectories of published runs, labelled by hand"


def content() -> str:
    hand = load_hand_labels(LABELS)
    rows = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines() if line.strip()]
    scored = run()
    figures = {name: scored.figures(split).figures() for name, split in (("tune", "tune"), ("holdout", "holdout"), ("holdout2", "holdout2"), ("holdout3", "holdout3"), ("all", None))}
    described = {
        "name": SET_NAME,
        "trajectories": len(hand),
        "agents": dict(sorted(Counter(r["agent"] for r in rows).items())),
        "domains": dict(sorted(Counter(r["domain"] for r in rows).items())),
        "causes": dict(sorted(Counter(f"{r['outcome']}:{r['cause']}" for r in rows).items())),
    }
    body = {"labeler": "offline", "set": described, "figures": figures,
            "definitions": "recall: agent-caused failures counted as the agent's with at least one right LACKING label; precision: LACKING "
                           "labels right on counted trajectories; spared: non-agent failures left out or unlabelled; blamed: successes "
                           "with a LACKING label the hand labels do not give"}  # fmt: skip
    return json.dumps(body, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    TARGET.write_text(content(), encoding="utf-8")
    print(TARGET.read_text(encoding="utf-8"))
