"""Sandbox benchmark: cold start and persistent-worker call latency per available backend.

    python bench/bench_sandbox.py [--runs 10] [--json out.json] [--backends bwrap,docker,...]
    python bench/bench_sandbox.py --split [--runs 10] [--episodes 10]     # per-step cost of the shim
    python bench/bench_sandbox.py --hardening                              # aggregate limits + integrity check

Cold start = open a sandbox + run ``true``-equivalent (``python -S -c pass``) + close it: what a
one-shot validation costs. Also reported: the exec latency of that command in an already open
sandbox, the time to start a worker (process up, handler imported), and the median round trip of
``echo`` calls into a warm worker. Medians of N runs, all backends measured in the same run, with
ratios against ``unsafe-subprocess`` (no isolation: the floor). Not a test.

``--split`` measures what running env code in a process of its own costs per env step (issue 19): the same
blueprint episode stepped in process (the engine called directly), through a worker that holds the channel
itself (``Sandbox.shimmed = False``: the layout before the split) and through the shim and its env process (as
shipped), on each contained backend, in alternating rounds of one run. It prints medians, the ratio after/before
and each sandboxed step as a multiple of the in-process one (the bar: within 5x).

``--hardening`` measures, in the same run, what the aggregate limits and the worker's integrity check
cost: each contained backend with them (as shipped) and without (``Sandbox.hardened = False``: no cgroup,
no tmpfs work dir or /dev/shm cap, no seccomp filter, no CPU quota, no integrity check), with the ratio
after/before. It also times calls into an env worker (``trace_env.handler`` hosting the tiny test env:
``generate`` and a full ``episode``), where the integrity snapshot is largest.
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
from typing import Any

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


TINY_ENV = Path(__file__).resolve().parents[1] / "tests" / "envs" / "tiny_cancel.py"
MEASURES = ("cold_start_s", "exec_s", "worker_start_s", "worker_call_s", "env_generate_s", "env_episode_s")


class _Side:
    """One open sandbox (hardened or not) with an echo worker and a worker hosting the tiny env."""

    def __init__(self, name: str, hardened: bool) -> None:
        self.name, self.hardened = name, hardened
        self.sb = construct(name, SandboxLimits())
        self.sb.hardened = hardened
        self.sb.open()
        self.echo = self.sb.start_worker("sandbox.handlers.echo")
        self.env = self.sb.start_worker("trace_env.handler")
        self.env.call("load", {"source": TINY_ENV.read_text()})

    def sample(self, calls: int) -> dict[str, float]:
        out = {}
        t0 = time.perf_counter()
        sb = construct(self.name, SandboxLimits())
        sb.hardened = self.hardened
        sb.open()
        assert sb.exec(PROBE).exit_code == 0
        sb.close()
        out["cold_start_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.sb.exec(PROBE)
        out["exec_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.sb.start_worker("sandbox.handlers.echo").close()
        out["worker_start_s"] = time.perf_counter() - t0
        for key, worker, method, params in (
            ("worker_call_s", self.echo, "echo", {"x": 1, "s": "hello"}),
            ("env_generate_s", self.env, "generate", {"seed": 3}),
            ("env_episode_s", self.env, "episode", {"seed": 3, "policy": "reference"}),
        ):
            t0 = time.perf_counter()
            for _ in range(calls):
                worker.call(method, params)
            out[key] = (time.perf_counter() - t0) / calls
        return out

    def close(self) -> None:
        self.sb.close()


SNAPSHOT_PROBE = """
def main():
    import statistics, time, trace_env.handler, sandbox.worker as worker
    snap = worker.Snapshot()
    assert snap.changes() == []
    samples = []
    for _ in range(30):
        t0 = time.perf_counter()
        for _ in range(100):
            snap.changes()
        samples.append((time.perf_counter() - t0) / 100)
    print(statistics.median(samples), len(snap.spaces), sum(x[2] for x in snap.spaces), len(snap.codes))
main()
"""


def integrity_check_cost(name: str) -> dict[str, float]:
    """The worker's per-call integrity check alone, timed inside the sandbox (what it adds to every call)."""
    sb = construct(name, SandboxLimits())
    sb.open()
    try:
        r = sb.exec(["python", "-c", SNAPSHOT_PROBE])
        seconds, spaces, entries, codes = r.stdout.split()
        return {"integrity_check_s": float(seconds), "namespaces": int(spaces), "entries": int(entries), "functions": int(codes)}
    finally:
        sb.close()


def bench_hardening(name: str, runs: int, calls: int) -> dict[str, dict[str, float]]:
    """Before/after medians, measured in alternating rounds (ABBA...) so that load drift cancels."""
    sides = {"before": _Side(name, False), "after": _Side(name, True)}
    samples: dict[str, dict[str, list[float]]] = {label: {k: [] for k in MEASURES} for label in sides}
    try:
        for side in sides.values():
            side.sample(max(5, calls // 10))  # warm-up
        for r in range(runs):
            for label in (("before", "after") if r % 2 == 0 else ("after", "before")):
                for key, value in sides[label].sample(calls).items():
                    samples[label][key].append(value)
    finally:
        for side in sides.values():
            side.close()
    return {label: {k: statistics.median(v) for k, v in by.items()} for label, by in samples.items()}


def _step_latencies(runner: Any, turns: list[Any], episodes: int, seed: int = 1) -> list[float]:
    """Seconds per ``step`` over ``episodes`` replays of one reference episode (reset not counted)."""
    out = []
    for _ in range(episodes):
        runner.reset(seed)
        for turn in turns:
            t0 = time.perf_counter()
            result = runner.step(turn)
            out.append(time.perf_counter() - t0)
            if result.terminated or result.truncated:
                break
    return out


def _worker_start(runner: Any) -> float:
    """Seconds to start one more worker in the runner's sandbox (process up, handler imported), as it is set."""
    box = runner.hosted.sandbox
    t0 = time.perf_counter()
    box.start_worker("trace_env.handler").close()
    return time.perf_counter() - t0


def bench_split(names: list[str], capability: str, runs: int, episodes: int) -> dict[str, float]:
    """Median step seconds: in process, and per backend before (worker holds the channel) and after (shim);
    with ``<backend>:<side>:start``, the median worker start."""
    from env_registry.hosted import SandboxedEnv, SandboxedRunner
    from factory.blueprints import blueprint_source
    from trace_env.engine import EpisodeRunner
    from trace_env.loader import load_env

    source = blueprint_source(capability)
    local = load_env(source)
    turns = local.reference_solution(local.generate(1))
    runners: dict[str, Any] = {"in-process": EpisodeRunner(local)}
    try:
        for name in names:
            for label, shimmed in (("before", False), ("after", True)):
                Sandbox.shimmed = shimmed
                try:
                    runners[f"{name}:{label}"] = SandboxedRunner(SandboxedEnv(source, backend=name))
                finally:
                    Sandbox.shimmed = True
        samples: dict[str, list[float]] = {key: [] for key in runners}
        for runner in runners.values():
            _step_latencies(runner, turns, 2)  # warm-up
        order = list(runners)
        for r in range(runs):
            for key in (order if r % 2 == 0 else order[::-1]):
                samples[key].append(statistics.median(_step_latencies(runners[key], turns, episodes)))
                if key != "in-process":
                    Sandbox.shimmed = key.endswith(":after")
                    try:
                        samples.setdefault(f"{key}:start", []).append(_worker_start(runners[key]))
                    finally:
                        Sandbox.shimmed = True
    finally:
        for key, runner in runners.items():
            if key != "in-process":
                runner.close()
    return {key: statistics.median(values) for key, values in samples.items()}


def split_main(args: argparse.Namespace) -> int:
    avail = available_backends()
    names = [b for b in (args.backends.split(",") if args.backends else ["bwrap", "docker"]) if avail.get(b) is None]
    print(f"# {', '.join(names)}: in-process / before / after in alternating rounds ...", file=sys.stderr, flush=True)
    med = bench_split(names, args.capability, args.runs, args.episodes)
    base = med["in-process"]
    print(f"env step ({args.capability}): median of {args.runs} alternating rounds, each the median step of "
          f"{args.episodes} reference episodes")
    print(f"  {'where':<28}{'step':>11}{'x in-process':>14}{'after/before':>14}")
    print(f"  {'in process':<28}{base * 1e6:>8.1f} us{1.0:>13.2f}x")
    for name in names:
        before, after = med[f"{name}:before"], med[f"{name}:after"]
        print(f"  {name + ': worker holds channel':<28}{before * 1e6:>8.1f} us{before / base:>13.2f}x")
        print(f"  {name + ': shim + env process':<28}{after * 1e6:>8.1f} us{after / base:>13.2f}x{after / before:>13.2f}x")
    print("worker start (trace_env.handler), median per round")
    for name in names:
        before, after = med[f"{name}:before:start"], med[f"{name}:after:start"]
        print(f"  {name:<10} before {before * 1e3:7.1f} ms   after {after * 1e3:7.1f} ms   after/before {after / before:5.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"runs": args.runs, "capability": args.capability, "step_s": med}, indent=2))
    return 0


def bench_backend(name: str, runs: int, calls: int, hardened: bool = True) -> dict[str, float]:
    limits = SandboxLimits()
    cold, execs, wstart, wcall = [], [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        sb = construct(name, limits)
        sb.hardened = hardened
        sb.open()
        r = sb.exec(PROBE)
        sb.close()
        cold.append(time.perf_counter() - t0)
        assert r.exit_code == 0, r
    sb = construct(name, limits)
    sb.hardened = hardened
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
    ap.add_argument("--hardening", action="store_true",
                    help="compare bwrap/docker with and without the aggregate limits and integrity check")
    ap.add_argument("--split", action="store_true",
                    help="per-step cost of the shim/env-process split: in process vs before vs after")
    ap.add_argument("--capability", default="precondition_verification", help="blueprint stepped by --split")
    ap.add_argument("--episodes", type=int, default=10, help="reference episodes per --split sample")
    args = ap.parse_args(argv)
    if args.hardening:
        return hardening_main(args)
    if args.split:
        return split_main(args)

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


def hardening_main(args: argparse.Namespace) -> int:
    avail = available_backends()
    names = [b for b in (args.backends.split(",") if args.backends else ["bwrap", "docker"]) if avail.get(b) is None]
    rows: dict[str, dict[str, dict[str, float]]] = {}
    for name in names:
        print(f"# {name}: before/after in alternating rounds ...", file=sys.stderr, flush=True)
        rows[name] = bench_hardening(name, args.runs, args.calls)
        rows[name]["integrity"] = integrity_check_cost(name)
    cols = [("cold_start_s", "cold start", 1e3, "ms"), ("exec_s", "exec", 1e3, "ms"),
            ("worker_start_s", "worker start", 1e3, "ms"), ("worker_call_s", "echo call", 1e6, "us"),
            ("env_generate_s", "env generate", 1e6, "us"), ("env_episode_s", "env episode", 1e6, "us")]
    print(f"aggregate limits + integrity check: median of {args.runs} alternating rounds, before/after in one run")
    for name, pair in rows.items():
        print(f"\n{name}")
        print(f"  {'measure':<14}{'before':>14}{'after':>14}{'ratio':>9}")
        for key, label, scale, unit in cols:
            before, after = pair["before"][key], pair["after"][key]
            print(f"  {label:<14}{before * scale:>11.1f} {unit}{after * scale:>11.1f} {unit}{after / before:>8.2f}x")
        cost = pair["integrity"]
        print(f"  integrity check alone: {cost['integrity_check_s'] * 1e6:.0f} us per call "
              f"({cost['namespaces']:.0f} namespaces, {cost['entries']:.0f} names, {cost['functions']:.0f} functions)")
    if args.json:
        args.json.write_text(json.dumps({"runs": args.runs, "hardening": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
