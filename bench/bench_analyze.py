"""Benchmark: ``factory analyze`` with the offline labeler on 1,000 τ² trajectories (target: < 30 s on 2 cores).

Builds 1,000 trajectories from the real τ² airline and retail tasks (careful replays and injected failures,
see ``factory.testing.injection``), writes them as JSONL, then times the command end to end in a fresh
Python process: start-up, import, task-version checks and attribution, labeling (once: the labeler is
deterministic), statistics with 1,000 bootstrap resamples over tasks, chart and report. Two configurations
are timed in alternation, so their ratio is measured under the same load: the default (one pass, no K of N)
and ``--runs 10`` (K = 8 of N = 10 resamples of the tasks must select a capability).
Run: ``python bench/bench_analyze.py [--shared PATH] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = REPO.parent / "shared" / "targets" / "tau2"
RUNNER = "import typer; from factory.cli.analyze import analyze_command; typer.run(analyze_command)"
CONFIGS = {"default": [], "resampled K=8 of N=10": ["--runs", "10"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="folder with airline/ and retail/ τ² data")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget", type=float, default=30.0, help="seconds; exit 1 when a median exceeds it")
    args = parser.parse_args()

    sys.path.insert(0, str(REPO))
    from factory.analyze.importers import write_jsonl
    from factory.testing.injection import build_cases
    from factory.testing.tau2_replay import Tau2Domain

    domains = [Tau2Domain.load(args.shared / name) for name in ("airline", "retail")]
    cases = build_cases(domains, seed=0)
    random.Random(0).shuffle(cases)
    trajectories = [c.trajectory for c in cases[: args.count]]
    times: dict[str, list[float]] = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "trajectories.jsonl"
        write_jsonl(trajectories, data)
        base = [
            sys.executable, "-c", RUNNER, str(data),
            "--tasks", str(args.shared / "airline" / "tasks.json"), "--tasks", str(args.shared / "retail" / "tasks.json"),
            "--bootstrap", "1000", "--out", str(Path(tmp) / "out"), "--json",
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO), "TRACE_LLM": ""}
        for _ in range(args.repeat):
            for name, extra in CONFIGS.items():  # alternated: both see the same load
                start = time.perf_counter()
                done = subprocess.run(base + extra, env=env, capture_output=True, text=True)
                times[name].append(time.perf_counter() - start)
                if done.returncode != 0:
                    print(done.stderr, file=sys.stderr)
                    return 2
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"factory analyze, offline labeler, {len(trajectories)} trajectories, 1000 bootstrap resamples, {os.cpu_count()} CPU(s)")
    for name, values in times.items():
        print(f"{name}: runs (s) " + ", ".join(f"{t:.2f}" for t in values) + f"; median {medians[name]:.2f} s (budget {args.budget:.0f} s)")
    first, second = list(medians.values())
    print(f"resampled / default: {second / first:.2f}x")
    return 0 if max(medians.values()) < args.budget else 1


if __name__ == "__main__":
    raise SystemExit(main())
