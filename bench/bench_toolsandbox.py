"""ToolSandbox target: the gold and empty policies on every runnable base scenario, with ToolSandbox's own
evaluator, and the seconds each scenario takes.

    python bench/bench_toolsandbox.py [--concurrency 1] [--out /tmp/bench-toolsandbox]

Needs Apple's ToolSandbox installed (README, "ToolSandbox"). Prints, per policy: base scenarios found, run and skipped,
mean similarity (95% bootstrap interval), perfect scenarios (95% Wilson interval), seconds per scenario
(median of the episodes' own durations, and wall time over scenarios, worker start-up included), the
gold/empty time ratio measured in this one run, and the load average around it (absolute seconds depend on
the machine and its load).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench-toolsandbox"))
    args = parser.parse_args()

    from factory.evaluate.scores import bootstrap_mean, wilson
    from factory.rollout.engine import Rollout, RolloutConfig
    from factory.rollout.store import RolloutStore

    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    per_scenario = {}
    for policy in ("scripted:gold", "scripted:empty"):
        out = args.out / policy.split(":")[1]
        shutil.rmtree(out, ignore_errors=True)
        started = time.monotonic()
        summary = Rollout(RolloutConfig(target="toolsandbox", policy=policy, out=out, concurrency=args.concurrency)).run()
        wall = time.monotonic() - started
        episodes = RolloutStore.load(out)
        rewards = [t.reward for t in episodes]
        median = statistics.median(float(t.metadata["duration_s"]) for t in episodes)
        per_scenario[policy] = median
        skipped = sum(summary.skipped.values())
        print(f"{policy}: {summary.episodes + skipped} base scenarios found, {summary.episodes} run, {skipped} skipped ({'; '.join(summary.skipped)}), {summary.errors} errors")
        print(f"  mean similarity {summary.mean_reward:.3f} {bootstrap_mean(rewards)}; perfect {summary.passed}/{summary.passed + summary.failed} "
              f"{wilson(summary.passed, summary.passed + summary.failed)}")
        print(f"  seconds per scenario: median episode {median:.3f} s; wall {wall / max(1, summary.episodes):.3f} s "
              f"({wall:.1f} s for {summary.episodes}, concurrency {args.concurrency}, worker start-up included)")
    print(f"gold / empty median episode time: {per_scenario['scripted:gold'] / per_scenario['scripted:empty']:.1f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
