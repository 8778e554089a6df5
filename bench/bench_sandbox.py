"""Sandbox benchmark: cold start and persistent-worker call latency per available backend.

    python bench/bench_sandbox.py [--runs 10] [--json out.json] [--backends bwrap,docker,...]

Cold start = open a sandbox + run ``true``-equivalent (``python -S -c pass``) + close it: what a
one-shot validation costs. Also reported: the exec latency of that command in an already open
sandbox, the time to start a worker (process up, handler imported), and the median round trip of
``echo`` calls into a warm worker. Medians of N runs, all backends measured in the same run, with
ratios against ``unsafe-subprocess`` (no isolation: the floor). Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sandbox  # noqa: E402
from sandbox import SandboxLimits, available_backends  # noqa: E402
from sandbox.base import Sandbox  # noqa: E402

PROBE = ["python", "-S", "-c", "pass"]


def construct(name: str, limits: SandboxLimits) -> Sandbox:
    if name == "e2b-fake":
        from sandbox.e2b_backend import E2BSandbox

        return E2BSandbox(limits, root=tempfile.mkdtemp(prefix="bench-e2b-"), python=sys.executable)
    return sandbox.construct(name, limits)


def bench_backend(name: str, runs: int, calls: int) -> dict[str, float]:
    limits = SandboxLimits()
    cold, execs, wstart, wcall = [], [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        sb = construct(name, limits)
        sb.open()
        r = sb.exec(PROBE)
        sb.close()
        cold.append(time.perf_counter() - t0)
        assert r.exit_code == 0, r
    sb = construct(name, limits)
    sb.open()
    try:
        sb.exec(PROBE)
        for _ in range(runs):
            t0 = time.perf_counter()
            sb.exec(PROBE)
            execs.append(time.perf_counter() - t0)
        for _ in range(runs):
            t0 = time.perf_counter()
            w = sb.start_worker("sandbox.handlers.echo")
            wstart.append(time.perf_counter() - t0)
            w.close()
        w = sb.start_worker("sandbox.handlers.echo")
        payload = {"x": 1, "s": "hello"}
        for _ in range(20):
            w.call("echo", payload)
        per_run = []
        for _ in range(runs):
            t0 = time.perf_counter()
            for _ in range(calls):
                w.call("echo", payload)
            per_run.append((time.perf_counter() - t0) / calls)
        wcall = per_run
        w.close()
    finally:
        sb.close()
    med = statistics.median
    return {"cold_start_s": med(cold), "exec_s": med(execs), "worker_start_s": med(wstart), "worker_call_s": med(wcall)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--calls", type=int, default=200, help="echo calls per worker-latency sample")
    ap.add_argument("--backends", default="", help="comma list (default: every available one)")
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    args = ap.parse_args(argv)

    avail = available_backends()
    names = [b for b in args.backends.split(",") if b] or [b for b, why in avail.items() if why is None]
    if "e2b" in names and not os.environ.get("E2B_API_KEY"):
        names.remove("e2b")
    if "unsafe-subprocess" in names:  # baseline first
        names.remove("unsafe-subprocess")
        names.insert(0, "unsafe-subprocess")
    for b, why in avail.items():
        if why is not None:
            print(f"# {b}: skipped ({why})", file=sys.stderr)

    results: dict[str, dict[str, float]] = {}
    for name in names:
        print(f"# benchmarking {name} ...", file=sys.stderr, flush=True)
        results[name] = bench_backend(name, args.runs, args.calls)

    base = results.get("unsafe-subprocess")
    cols = [("cold_start_s", "cold start", 1e3, "ms"), ("exec_s", "exec (warm)", 1e3, "ms"),
            ("worker_start_s", "worker start", 1e3, "ms"), ("worker_call_s", "worker call", 1e6, "us")]
    header = f"{'backend':<18}" + "".join(f"{label:>22}" for _, label, _, _ in cols)
    print(f"median of {args.runs} runs (worker call: mean of {args.calls} calls per run)")
    print(header)
    print("-" * len(header))
    for name, res in results.items():
        cells = []
        for key, _, scale, unit in cols:
            v = res[key] * scale
            ratio = f" ({res[key] / base[key]:.1f}x)" if base and name != "unsafe-subprocess" else ""
            cells.append(f"{v:8.2f} {unit}{ratio}".rjust(22))
        print(f"{name:<18}" + "".join(cells))
    if args.json:
        args.json.write_text(json.dumps({"runs": args.runs, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
