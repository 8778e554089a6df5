"""Gate benchmark: time of the full validation gate per blueprint (and the tiny fixture env).

    python bench/bench_gate.py [--backend bwrap] [--runs 1] [--json out.json] [--only name,...]

Prints one row per env: verdict, wall seconds, the 1-minute load average when it ended, and the seconds
of the slowest checks. The median over envs is the figure the gate is held to (about 10 s on 2 cores).
Not a test: wall times depend on the machine's load, so compare two trees by running their benches
interleaved (``--only``) under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from factory.blueprints import blueprint_names, blueprint_source  # noqa: E402
from factory.validation.gate import validate_source  # noqa: E402

TINY = Path(__file__).resolve().parents[1] / "tests" / "envs" / "tiny_cancel.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--only", default="", help="comma-separated env names (blueprints or 'tiny_cancel')")
    args = parser.parse_args()
    sources = {name: blueprint_source(name) for name in blueprint_names()}
    sources["tiny_cancel"] = TINY.read_text()
    if args.only:
        wanted = set(args.only.split(","))
        sources = {k: v for k, v in sources.items() if k in wanted}
    rows = []
    for name, source in sources.items():
        times, per_check, verdict, failures = [], {}, "", []
        for _ in range(args.runs):
            report = validate_source(source, backend=args.backend)
            times.append(report.seconds)
            verdict = report.status
            failures = [f"{c.name}: {c.message[:100]}" for c in report.failures()]
            for check in report.checks:
                per_check.setdefault(check.name, []).append(check.seconds)
        row = {
            "env": name,
            "status": verdict,
            "seconds": round(statistics.median(times), 2),
            "load": round(os.getloadavg()[0], 1),
            "checks": {k: round(statistics.median(v), 2) for k, v in per_check.items()},
            "failures": failures,
        }
        rows.append(row)
        slowest = sorted(row["checks"].items(), key=lambda kv: -kv[1])[:4]
        print(f"{name:28s} {verdict:7s} {row['seconds']:5.1f}s (load {row['load']:4.1f})  "
              + "  ".join(f"{k}={v:.1f}" for k, v in slowest), flush=True)
        for failure in failures:
            print(f"    FAIL {failure}", flush=True)
    median = statistics.median(r["seconds"] for r in rows)
    print(f"median gate time: {median:.1f}s over {len(rows)} envs (backend {args.backend})")
    if args.json:
        args.json.write_text(json.dumps({"backend": args.backend, "median_s": median, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
