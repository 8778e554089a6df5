"""Does a training-like load lose pooled workers while other sandboxes come and go beside it? (issue 20)

    python bench/bench_pool_churn.py [--seconds 300] [--slots 4] [--backend bwrap] [--churn bwrap,docker]
                                     [--hogs 2] [--capability permission_error_recovery] [--json]

The load: a blueprint env registered in a scratch registry, ``trainer.envpool.EnvPool`` with ``--slots`` pooled
workers (opened as training opens them), playing the env's reference episodes on all slots at once, seed after
seed, step by step (what a rollout does), for ``--seconds``. Beside it: ``--hogs`` processes spinning on the CPU
and one churn thread per ``--churn`` backend that opens a sandbox, starts a worker, calls it, and closes it,
without pause - every close runs that sandbox's reaper while the pool's workers live, and on bwrap every open
takes a new pid namespace (whose inode number the kernel may hand out again) and a private uid.

Counted: episodes played, episodes whose reward differs from the reference episode's (the worker's own
``episode`` RPC), workers the pool replaced, episodes replayed on a replacement, infrastructure errors (an
episode the pool gave up on), and every failure message; sandboxes the churn opened and closed and any churn
failure. Before the reaper pinned namespaces and held uids, the learning helper saw pooled workers die with
``Broken pipe`` / exit -9 under this kind of churn (notes/issue-20.md). Exit status 1 if any worker was lost.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

HOG = "while True: pass"


def register(capability: str, root: Path) -> str:
    """Register the blueprint env in a scratch registry; its gym id."""
    from env_registry.registration import register_all
    from env_registry.registry import Registry
    from factory.blueprints import blueprint_source
    from trace_env.loader import load_env

    source = blueprint_source(capability)
    env = load_env(source)
    manifest, _ = Registry(root).put(source, capability=env.capability, target=env.target, tools=env.tools(),
                                     max_steps=env.max_steps)
    register_all(root)
    return manifest.gym_id


class Churn(threading.Thread):
    """Open a sandbox, start a worker, call it once, close - until stopped. Counts what it did."""

    def __init__(self, backend: str, stop: threading.Event) -> None:
        super().__init__(daemon=True, name=f"churn-{backend}")
        self.backend, self.stop = backend, stop
        self.cycles = 0
        self.failures: list[str] = []

    def run(self) -> None:
        from sandbox import SandboxLimits, open_sandbox

        while not self.stop.is_set():
            try:
                box = open_sandbox(self.backend, SandboxLimits(wall_timeout_s=60))
                try:
                    box.start_worker("trace_env.handler")  # a process in the sandbox that close() must reap
                    box.exec(["python", "-S", "-c", "pass"], timeout_s=60)
                finally:
                    box.close()
                self.cycles += 1
            except Exception as exc:  # counted, never fatal: the churn is the disturbance, not the subject
                self.failures.append(f"{type(exc).__name__}: {exc}"[:300])


def play(pool: Any, slots: int, seeds: list[int], scripts: dict[int, list[Any]]) -> list[tuple[int, float | None, str | None]]:
    """One round: every slot plays its seed's reference actions, in lock step (a rollout's shape)."""
    outcomes = pool.reset(list(range(slots)), seeds)
    results: dict[int, tuple[float | None, str | None]] = {}
    live = []
    for slot, outcome in enumerate(outcomes):
        if outcome.reply is None:
            results[slot] = (None, outcome.error)
        else:
            live.append(slot)
    turn = 0
    while live:
        acting = [s for s in live if turn < len(scripts[seeds[s]])]
        for s in set(live) - set(acting):  # script done without termination: the episode's reward so far
            results[s] = (results.get(s, (0.0, None))[0] or 0.0, None)
        live = acting
        if not live:
            break
        stepped = pool.step(live, [scripts[seeds[s]][turn] for s in live])
        still = []
        for s, outcome in zip(live, stepped):
            if outcome.reply is None:
                results[s] = (None, outcome.error)
            elif outcome.reply.terminated or outcome.reply.truncated:
                results[s] = (outcome.reply.reward, None)
            else:
                results[s] = (outcome.reply.reward, None)
                still.append(s)
        live, turn = still, turn + 1
    return [(seeds[s], *results[s]) for s in range(slots)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--churn", default="bwrap,docker", help="backends to churn beside the pool ('' for none)")
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--capability", default="permission_error_recovery")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from sandbox import available_backends
    from trainer.envpool import EnvPool

    usable = available_backends()
    churn_backends = [b for b in args.churn.split(",") if b]
    for name in [args.backend, *churn_backends]:
        if usable.get(name, "unknown backend") is not None:
            print(f"backend {name} is not usable here: {usable.get(name, 'unknown backend')}", file=sys.stderr)
            return 2
    root = Path(tempfile.mkdtemp(prefix="bench-churn-"))
    gym_id = register(args.capability, root)
    stop = threading.Event()
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    churns = [Churn(b, stop) for b in churn_backends]
    played: list[tuple[int, float | None, str | None]] = []
    wrong: list[tuple[int, float | None, float]] = []
    started = time.monotonic()
    try:
        with EnvPool(gym_id, sandbox=args.backend) as pool:
            pool.ensure(args.slots)
            hosted = pool.envs[0].unwrapped.runner.hosted
            seeds_known = range(8 * args.slots)  # cycled: every reset of a seed must hash as its first did
            scripts = {s: hosted.call("solution", {"seed": s, "which": "reference"}) for s in seeds_known}
            expected = {s: float(hosted.call("episode", {"seed": s, "policy": "reference"})["reward"]) for s in seeds_known}
            del hosted
            started = time.monotonic()
            for churn in churns:
                churn.start()
            seed = 0
            while time.monotonic() - started < args.seconds:
                seeds = [(seed + i) % len(seeds_known) for i in range(args.slots)]
                seed += args.slots
                for s, reward, error in play(pool, args.slots, seeds, scripts):
                    played.append((s, reward, error))
                    if error is None and reward is not None and abs(reward - expected[s]) > 1e-9:
                        wrong.append((s, reward, expected[s]))
            replaced, replayed, crashes, started_workers = pool.replaced, pool.replayed, list(pool.crashes), pool.started
    finally:
        stop.set()
        for churn in churns:
            churn.join(timeout=120)
        for hog in hogs:
            hog.kill()
            hog.wait()
    elapsed = time.monotonic() - started
    errors = [e for _, _, e in played if e is not None]
    result = {
        "backend": args.backend, "capability": args.capability, "slots": args.slots, "hogs": args.hogs,
        "seconds": round(elapsed, 1), "episodes": len(played), "wrong_rewards": len(wrong),
        "infrastructure_errors": len(errors), "workers_started": started_workers, "workers_replaced": replaced,
        "episodes_replayed": replayed, "worker_failures": crashes[:10],
        "churn": {c.backend: {"cycles": c.cycles, "failures": len(c.failures), "first_failures": c.failures[:3]}
                  for c in churns},
    }
    lost = bool(crashes or errors or wrong)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{args.capability} on {args.slots} pooled {args.backend} workers, {args.hogs} CPU hogs, "
              f"churn {','.join(churn_backends) or 'none'}, {elapsed:.0f} s:")
        print(f"  episodes played {len(played)}; reward differs from the reference {len(wrong)}; "
              f"infrastructure errors {len(errors)}")
        print(f"  workers started {started_workers}; replaced {replaced}; episodes replayed {replayed}")
        for c in churns:
            print(f"  churn {c.backend}: {c.cycles} sandboxes opened, worker started, closed; {len(c.failures)} failed")
        for failure in crashes[:10]:
            print(f"  worker failure: {failure}")
        print("LOST WORKERS" if lost else "no worker lost")
    return 1 if lost else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
