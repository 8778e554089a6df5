"""What pooling sandbox workers saves per episode, and what hardening costs a cold start, in one run.

    python bench/bench_envpool.py [--rounds 12] [--backend bwrap] [--capability permission_error_recovery] [--json]

One episode = reset to a seed, then the env's reference actions stepped one by one (what a rollout does),
for a shipped blueprint env. Three ways, interleaved round by round so machine load hits all alike:

* cold, hardened: open a sandbox as shipped (cgroup, capped tmpfs, seccomp, CPU quota, the worker's
  integrity check), start the env worker, load the env, play the episode, close;
* cold, plain: the same with ``Sandbox.hardened = False`` (what those protections cost a cold start);
* pooled: play the episode on a worker started once (what ``trainer.envpool`` does: reset, not restart).

Prints medians and the ratios hardened/plain (cold start) and cold/pooled (per episode). Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def episode(worker, seed: int, actions: list) -> None:
    worker.call("reset", {"seed": seed}, timeout_s=120)
    for action in actions:
        reply = worker.call("step", {"action": action}, timeout_s=120)
        if reply.get("terminated") or reply.get("truncated"):
            break


def cold(backend: str, source: str, hardened: bool, seed: int, actions: list) -> float:
    import sandbox
    from sandbox import SandboxLimits

    started = time.perf_counter()
    box = sandbox.construct(backend, SandboxLimits())
    box.hardened = hardened
    box.open()
    try:
        worker = box.start_worker("trace_env.handler")
        worker.call("load", {"source": source}, timeout_s=120)
        episode(worker, seed, actions)
    finally:
        box.close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--capability", default="permission_error_recovery")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import sandbox
    from factory.blueprints import blueprint_source
    from sandbox import SandboxLimits

    source = blueprint_source(args.capability)
    pool_box = sandbox.construct(args.backend, SandboxLimits())
    pool_box.open()
    times: dict[str, list[float]] = {"cold_hardened_s": [], "cold_plain_s": [], "pooled_s": []}
    try:
        pooled = pool_box.start_worker("trace_env.handler")
        pooled.call("load", {"source": source}, timeout_s=120)
        seeds = list(range(args.rounds))
        scripts = {seed: pooled.call("solution", {"seed": seed, "which": "reference"}, timeout_s=120) for seed in seeds}
        for seed in seeds:  # interleaved: the same load on all three
            times["cold_hardened_s"].append(cold(args.backend, source, True, seed, scripts[seed]))
            times["cold_plain_s"].append(cold(args.backend, source, False, seed, scripts[seed]))
            started = time.perf_counter()
            episode(pooled, seed, scripts[seed])
            times["pooled_s"].append(time.perf_counter() - started)
    finally:
        pool_box.close()
    medians = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "backend": args.backend, "capability": args.capability, "rounds": args.rounds,
        **{k: round(v, 4) for k, v in medians.items()},
        "hardened_over_plain_cold": round(medians["cold_hardened_s"] / medians["cold_plain_s"], 2),
        "cold_over_pooled_episode": round(medians["cold_hardened_s"] / medians["pooled_s"], 1),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{args.capability} on {args.backend}, median of {args.rounds} interleaved rounds:")
    print(f"  episode on a fresh hardened sandbox  {medians['cold_hardened_s'] * 1000:8.1f} ms")
    print(f"  episode on a fresh plain sandbox     {medians['cold_plain_s'] * 1000:8.1f} ms")
    print(f"  episode on a pooled worker (reset)   {medians['pooled_s'] * 1000:8.1f} ms")
    print(f"  hardened / plain cold start {result['hardened_over_plain_cold']}x; fresh / pooled per episode "
          f"{result['cold_over_pooled_episode']}x")


if __name__ == "__main__":  # pragma: no cover
    main()
