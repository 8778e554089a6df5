"""What a fresh env per episode costs: the handler re-executes the env module at every ``reset`` (no state
survives an episode), against reusing one env object (the path before). In process, through the handler's
own ``reset``/``step``, reference episodes of an env module, rounds alternating so load hits both alike.

    python bench/bench_fresh_env.py [--env examples/envs/cancellation_eligibility.py] [--episodes 200] [--rounds 5]

Prints per-episode and per-reset medians and the ratios fresh / reused (ratios, not thresholds: absolute
numbers depend on the machine), plus the module execution alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this tree, whatever is installed

from trace_env import gate_calls, handler  # noqa: E402


def _episodes(seeds: list[int], plans: dict[int, list]) -> tuple[float, float]:
    """(median episode µs, median reset µs) over ``seeds``, reference turns replayed through reset/step."""
    episodes, resets = [], []
    for seed in seeds:
        start = time.perf_counter()
        handler.reset({"seed": seed})
        resets.append(time.perf_counter() - start)
        for turn in plans[seed]:
            if handler.step({"action": turn})["terminated"]:
                break
        episodes.append(time.perf_counter() - start)
    return statistics.median(episodes) * 1e6, statistics.median(resets) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="examples/envs/cancellation_eligibility.py")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    handler.load({"source": Path(args.env).read_text()})
    seeds = list(range(args.episodes))
    plans = {seed: gate_calls.solution({"seed": seed, "which": "reference"}) for seed in seeds}  # scenarios cached too
    fresh_env = handler._fresh_env
    reused = {"fresh": ([], []), "reused": ([], [])}
    for _ in range(args.rounds):
        for mode in ("reused", "fresh"):
            handler._fresh_env = fresh_env if mode == "fresh" else handler._env  # type: ignore[assignment]
            episode_us, reset_us = _episodes(seeds, plans)
            reused[mode][0].append(episode_us)
            reused[mode][1].append(reset_us)
    handler._fresh_env = fresh_env  # type: ignore[assignment]
    program = handler._state["program"]
    execs = []
    for _ in range(200):
        start = time.perf_counter()
        program.fresh()
        execs.append(time.perf_counter() - start)
    (fe, fr), (re_, rr) = ([statistics.median(v) for v in reused[m]] for m in ("fresh", "reused"))
    print(f"env: {args.env}; {args.episodes} reference episodes x {args.rounds} rounds per mode")
    print(f"module execution + new env alone: median {statistics.median(execs) * 1e6:.0f} µs")
    print(f"reset   reused {rr:8.0f} µs   fresh {fr:8.0f} µs   fresh/reused {fr / rr:.2f}x")
    print(f"episode reused {re_:8.0f} µs   fresh {fe:8.0f} µs   fresh/reused {fe / re_:.2f}x")


if __name__ == "__main__":
    main()
