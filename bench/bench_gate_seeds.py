"""Gate verdicts across run seeds and machine load: does the verdict follow the env, not the draw or the machine?

    python bench/bench_gate_seeds.py --seeds 100 [--only cancellation_eligibility,tool_calling_precision] [--parallel 2]
    python bench/bench_gate_seeds.py --load 16 [--runs 1] [--only ...]

``--seeds N`` validates every env with run seeds ``start .. start+N-1`` (each run its own process, through
``bench_gate.py --one``) and reports, per env, how many runs ended passed / failed / inconclusive / starved, the
flips (runs whose status differs from the env's most common one) and what the minority runs said. ``--load K``
validates every env once idle and once beside K CPU-bound busy loops (``sh -c 'while :; do :; done'``, killed at
the end), and reports both wall times, their ratio and both verdicts. Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gate import EXTRA, ROOT, run  # noqa: E402


def envs(only: str) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from factory.blueprints import blueprint_names

    names = list(blueprint_names()) + list(EXTRA)
    return [e for e in names if e in set(only.split(","))] if only else names


def seeds_bench(names: list[str], backend: str, start: int, count: int, parallel: int) -> dict:
    out = {}
    for env in names:
        began = time.perf_counter()
        def one(seed: int) -> tuple[int, dict]:
            result = run(ROOT, env, backend, seed)
            print(f"  {env} run_seed {seed}: {result['status']} {result['seconds']:.1f} s "
                  + "; ".join(result["failures"] + result.get("inconclusive", []))[:300], flush=True)
            return seed, result

        with ThreadPoolExecutor(max_workers=parallel) as pool:
            results = list(pool.map(one, range(start, start + count)))
        statuses = Counter(r["status"] for _, r in results)
        usual = statuses.most_common(1)[0][0]
        odd = [(seed, r) for seed, r in results if r["status"] != usual]
        out[env] = {"statuses": dict(statuses), "usual": usual, "flips": len(odd),
                    "median_s": round(statistics.median(r["seconds"] for _, r in results), 2),
                    "odd": [{"run_seed": seed, "status": r["status"], "failures": r["failures"],
                             "inconclusive": r.get("inconclusive", []), "starved": r.get("starved")} for seed, r in odd]}
        print(f"{env:28s} {dict(statuses)}  flips {len(odd)}/{count}  median {out[env]['median_s']:.1f} s  "
              f"({time.perf_counter() - began:.0f} s)", flush=True)
        for item in out[env]["odd"][:5]:
            print(f"    run_seed {item['run_seed']}: {item['status']}: "
                  + "; ".join(item["failures"] + item["inconclusive"] + ([item["starved"]] if item["starved"] else []))[:400], flush=True)
    return out


def load_bench(names: list[str], backend: str, load: int, runs: int, run_seed: int) -> dict:
    def gate(env: str) -> list[dict]:
        return [run(ROOT, env, backend, run_seed + i) for i in range(runs)]

    idle = {env: gate(env) for env in names}
    hogs = [subprocess.Popen(["timeout", "900", "sh", "-c", "while :; do :; done"], start_new_session=True) for _ in range(load)]
    try:
        time.sleep(1)
        busy = {env: gate(env) for env in names}
    finally:
        for hog in hogs:  # only the processes started here, each by its own process group
            try:
                os.killpg(hog.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            hog.wait()
    out = {}
    for env in names:
        a = statistics.median(r["seconds"] for r in idle[env])
        b = statistics.median(r["seconds"] for r in busy[env])
        out[env] = {"idle_s": round(a, 2), "busy_s": round(b, 2), "ratio": round(b / a, 2),
                    "idle_status": [r["status"] for r in idle[env]], "busy_status": [r["status"] for r in busy[env]],
                    "busy_notes": [r.get("starved") or "; ".join(r["failures"] + r.get("inconclusive", [])) for r in busy[env]]}
        same = out[env]["idle_status"] == out[env]["busy_status"]
        print(f"{env:28s} idle {a:5.1f} s {out[env]['idle_status']}  busy {b:5.1f} s {out[env]['busy_status']}  "
              f"ratio {b / a:.2f}  {'same verdicts' if same else 'VERDICTS DIFFER'}", flush=True)
        if not same:
            for note in out[env]["busy_notes"]:
                print(f"    busy: {note[:300]}", flush=True)
    ratios = [v["ratio"] for v in out.values()]
    print(f"busy/idle wall ratio beside {load} busy loops: median {statistics.median(ratios):.2f}, max {max(ratios):.2f}; "
          f"verdicts the same on {sum(v['idle_status'] == v['busy_status'] for v in out.values())}/{len(out)} envs")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--only", default="", help="comma-separated env names (blueprints, tiny_checked, cancellation_eligibility)")
    parser.add_argument("--seeds", type=int, default=0, help="run seeds per env (the flip bench)")
    parser.add_argument("--start", type=int, default=0, help="the first run seed")
    parser.add_argument("--parallel", type=int, default=1, help="gate runs at once (the flip bench)")
    parser.add_argument("--load", type=int, default=0, help="busy loops beside the gate (the load bench)")
    parser.add_argument("--runs", type=int, default=1, help="gate runs per env and condition (the load bench)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    names = envs(args.only)
    result: dict = {"backend": args.backend, "load": os.getloadavg()[0]}
    if args.seeds:
        result["seeds"] = seeds_bench(names, args.backend, args.start, args.seeds, args.parallel)
    if args.load:
        result["busy"] = load_bench(names, args.backend, args.load, args.runs, args.start or 12345)
    if not (args.seeds or args.load):
        parser.error("give --seeds N, --load K or both")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
