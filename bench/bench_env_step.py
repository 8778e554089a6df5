"""Median step latency of a blueprint env: in-process vs each sandbox backend, measured in one run.

    python bench/bench_env_step.py [--capability precondition_verification] [--episodes 30]

Prints the medians and the ratio of each sandboxed step to the in-process step (a ratio, not a timing
threshold: absolute numbers depend on the machine).
"""

from __future__ import annotations

import argparse
import statistics
import time

from trace_env.loader import load_env
from trace_env.engine import EpisodeRunner
from env_registry.hosted import SandboxedEnv, SandboxedRunner
from factory.blueprints import blueprint_source
from sandbox import available_backends


def step_latencies(runner, env_for_solutions, episodes: int) -> list[float]:
    latencies = []
    for seed in range(episodes):
        runner.reset(seed)
        for turn in env_for_solutions.reference_solution(env_for_solutions.generate(seed)):
            started = time.perf_counter()
            result = runner.step(turn)
            latencies.append((time.perf_counter() - started) * 1000)
            if result.terminated or result.truncated:
                break
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capability", default="precondition_verification")
    parser.add_argument("--episodes", type=int, default=30)
    args = parser.parse_args()
    source = blueprint_source(args.capability)
    local_env = load_env(source)
    rows = [("in-process", statistics.median(step_latencies(EpisodeRunner(local_env), local_env, args.episodes)))]
    for backend, why_not in available_backends().items():
        if why_not is not None or backend == "e2b":
            continue
        with SandboxedEnv(source, backend=backend) as hosted:
            rows.append((backend, statistics.median(step_latencies(SandboxedRunner(hosted), local_env, args.episodes))))
    base = rows[0][1]
    print(f"{args.capability}: median step latency over {args.episodes} reference episodes")
    print(f"{'backend':<20}{'median ms':>12}{'x in-process':>14}")
    for name, median in rows:
        print(f"{name:<20}{median:>12.3f}{median / base:>14.1f}")


if __name__ == "__main__":
    main()
