"""Gate benchmark: the full validation gate per blueprint (and the example and tiny envs), before and after.

    python bench/bench_gate.py [--baseline REF] [--runs 3] [--hog] [--cpu] [--backend bwrap] [--only name,...] [--json out.json]

Each gate run is its own process (``python bench/bench_gate.py --one ENV``), so imports and caches do not carry
over. With ``--baseline REF`` the same envs are validated by the tree of git revision REF too (extracted with
``git archive`` into a temporary folder), interleaved run by run with this tree, so both see the same load; the
figures to compare are the ratios of the two. ``--hog`` keeps one busy-looping process beside the gate (a
machine that is not idle). Per env it prints the median wall seconds of each tree, the CPU seconds of the host
process and (where the tree reports it) of the env workers, and the share of the new tree's time spent in the
exploit search; then the medians over envs. ``--cpu`` adds each run's CPU over all its processes (``perf stat``), the
figure to compare on a shared machine, and the episodes the gate played. Not a test: wall times depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTRA = {"tiny_checked": ROOT / "tests" / "gate" / "envs" / "tiny_checked.py",
         "cancellation_eligibility": ROOT / "examples" / "envs" / "cancellation_eligibility.py"}


def one(env: str, backend: str, run_seed: int) -> None:
    """Validate one env in this process (this tree's code is first on sys.path) and print one JSON line."""
    sys.path.insert(0, os.getcwd())
    from factory.blueprints import blueprint_names, blueprint_source
    from factory.validation import gate as gate_module
    from schemas.validation import ValidationConfig

    source = blueprint_source(env) if env in blueprint_names() else Path(env).read_text()
    fields = ValidationConfig.model_fields
    config = ValidationConfig(**({"run_seed": run_seed} if "run_seed" in fields else {}))
    started = time.perf_counter()
    if hasattr(gate_module, "Gate"):  # the gate's settings as one object
        report = gate_module.validate_source(source, gate_module.Gate(config=config, backend=backend))
    else:  # trees before it (966b3f8) take them as keywords
        report = gate_module.validate_source(source, config=config, backend=backend)
    wall = time.perf_counter() - started
    own = resource.getrusage(resource.RUSAGE_SELF)
    host = own.ru_utime + own.ru_stime
    workers = getattr(report, "worker_cpu_s", None)
    checks = {c.name: c.seconds for c in report.checks}
    found = next((c for c in report.checks if c.name == "exploit_search"), None)
    closest = None if found is None or "closest" not in found.data else {
        k: found.data[k] for k in ("closest", "closest_family", "closest_mean_share", "closest_match_share")}
    print(json.dumps({"status": report.status, "seconds": round(wall, 3), "host_cpu": round(host, 3), "worker_cpu": workers, "checks": checks, "closest_exploit": closest,
                      "episodes": sum(c.episodes for c in report.checks),
                      "failures": [f"{c.name}: {c.message[:120]}" for c in report.failures() if not getattr(c, "inconclusive", False)],
                      "inconclusive": [f"{c.name}: {c.message[:200]}" for c in report.checks if getattr(c, "inconclusive", False)],
                      "starved": getattr(report, "starved", None)}))


def run(tree: Path, env: str, backend: str, run_seed: int, cpu: bool = False) -> dict:
    """One gate run in its own process; with ``cpu``, under ``perf stat``, whose task-clock counts every process
    of the run (host, shims, templates and each episode's process, reaped or not): the CPU the gate cost, which,
    unlike its wall time, a shared machine's load hardly moves."""
    target = str(EXTRA[env]) if env in EXTRA else env
    command = [sys.executable, str(Path(__file__).resolve()), "--one", target, "--backend", backend, "--run-seed", str(run_seed)]
    if cpu:
        command = ["perf", "stat", "-x", ",", "-e", "task-clock", "--", *command]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{tree.name}/{env}: {done.stderr.strip()[-500:]}")
    result = json.loads(lines[-1])
    clock = [line.split(",") for line in done.stderr.splitlines() if ",task-clock" in line]
    if clock and clock[-1][0].replace(".", "", 1).isdigit():
        result["total_cpu"] = round(float(clock[-1][0]) / 1000, 2)
    return result


def hog(stop: multiprocessing.Event) -> None:  # type: ignore[valid-type]
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--baseline", default="", help="a git revision to compare with, run interleaved (e.g. 966b3f8)")
    parser.add_argument("--hog", action="store_true", help="keep one busy-looping process running beside the gate")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--only", default="", help="comma-separated env names (blueprints, tiny_checked, cancellation_eligibility)")
    parser.add_argument("--run-seed", type=int, default=12345, help="the gate's run_seed (the same seeds in every run)")
    parser.add_argument("--cpu", action="store_true", help="also measure each run's total CPU (all its processes) with perf stat")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one, args.backend, args.run_seed)
        return
    sys.path.insert(0, str(ROOT))
    from factory.blueprints import blueprint_names

    envs = list(blueprint_names()) + list(EXTRA)
    if args.only:
        envs = [e for e in envs if e in set(args.only.split(","))]
    trees = {"new": ROOT}
    scratch = tempfile.TemporaryDirectory(prefix="bench-gate-base-")
    if args.baseline:
        base = Path(scratch.name)
        archive = subprocess.run(["git", "archive", args.baseline], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        (base / "bench").mkdir(exist_ok=True)
        (base / "bench" / "bench_gate.py").write_text(Path(__file__).read_text())  # the same harness on both trees
        trees = {"base": base, "new": ROOT}
    stop = multiprocessing.Event()
    hogger = multiprocessing.Process(target=hog, args=(stop,), daemon=True) if args.hog else None
    if hogger:
        hogger.start()
    rows = []
    try:
        for env in envs:
            results: dict[str, list[dict]] = {name: [] for name in trees}
            for index in range(args.runs):
                order = list(trees) if index % 2 == 0 else list(reversed(trees))
                for name in order:
                    results[name].append(run(trees[name], env, args.backend, args.run_seed, args.cpu))
            row = {"env": env, "load": round(os.getloadavg()[0], 1)}
            for name, items in results.items():
                wall = statistics.median(r["seconds"] for r in items)
                host = statistics.median(r["host_cpu"] for r in items)
                workers = [r["worker_cpu"] for r in items if r.get("worker_cpu") is not None]
                exploit = statistics.median(r["checks"].get("exploit_search", 0.0) for r in items)
                row[name] = {"seconds": round(wall, 2), "host_cpu": round(host, 2),
                             "worker_cpu": round(statistics.median(workers), 2) if workers else None,
                             "exploit_share": round(exploit / wall, 3) if wall else 0, "status": items[-1]["status"],
                             "episodes": items[-1].get("episodes"),
                             "total_cpu": statistics.median(r["total_cpu"] for r in items) if all("total_cpu" in r for r in items) else None,
                             "closest_exploit": items[-1].get("closest_exploit"),
                             "failures": items[-1]["failures"]}
            rows.append(row)
            parts = [f"{name} {row[name]['status']} {row[name]['seconds']:5.1f}s (host cpu {row[name]['host_cpu']:4.1f}s"
                     + (f", workers {row[name]['worker_cpu']:4.1f}s" if row[name]["worker_cpu"] is not None else "")
                     + (f", all {row[name]['total_cpu']:4.1f}s" if row[name]["total_cpu"] is not None else "")
                     + (f", {row[name]['episodes']} episodes" if row[name]["episodes"] is not None else "") + ")"
                     for name in trees]
            extra = f"  exploit search {row['new']['exploit_share']:.0%} of the gate"
            ratio = f"  new/base {row['new']['seconds'] / row['base']['seconds']:.2f}" if "base" in row else ""
            if "base" in row and row["new"]["total_cpu"] and row["base"]["total_cpu"]:
                ratio += f" (cpu {row['new']['total_cpu'] / row['base']['total_cpu']:.2f})"
            print(f"{env:28s} " + " | ".join(parts) + ratio + extra + f"  (load {row['load']})", flush=True)
            closest = row["new"].get("closest_exploit")
            if closest:
                print(f"    closest exploit: {closest['closest']} ({closest['closest_family']}): mean "
                      f"{closest['closest_mean_share']:.2f} of the reference, matches on {closest['closest_match_share']:.0%} of seeds", flush=True)
            for failure in row["new"]["failures"]:
                print(f"    FAIL {failure}", flush=True)
    finally:
        stop.set()
        if hogger:
            hogger.join(timeout=5)
        scratch.cleanup()
    for name in trees:
        print(f"median gate time ({name}): {statistics.median(r[name]['seconds'] for r in rows):.1f} s over {len(rows)} envs, "
              f"median host CPU {statistics.median(r[name]['host_cpu'] for r in rows):.1f} s (backend {args.backend}"
              f"{', one CPU hog beside it' if args.hog else ''})")
    if "base" in trees:
        print(f"median new/base wall ratio: {statistics.median(r['new']['seconds'] / r['base']['seconds'] for r in rows):.2f}")
        if all(r[name]["total_cpu"] for r in rows for name in trees):
            print(f"median new/base CPU ratio (every process of the run): "
                  f"{statistics.median(r['new']['total_cpu'] / r['base']['total_cpu'] for r in rows):.2f}")
    print(f"exploit search share of the new gate: median {statistics.median(r['new']['exploit_share'] for r in rows):.0%}, "
          f"max {max(r['new']['exploit_share'] for r in rows):.0%}")
    if args.json:
        args.json.write_text(json.dumps({"backend": args.backend, "hog": args.hog, "baseline": args.baseline, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
