"""What a fresh process per episode costs: every ``reset`` forked from the clean template (``sandbox.template``)
against one env process per worker that re-executes the env module at each reset (the layout before), both
through real sandbox workers as training drives them (``SandboxedRunner``: reset, then the reference solution's
turns as steps), rounds alternating so the host's load hits both alike.

    python bench/bench_fresh_process.py [--backend bwrap] [--env examples/envs/cancellation_eligibility.py]
                                        [--episodes 30] [--rounds 3] [--repeat 1]

``--repeat N`` plays each seed N times in a row (a GRPO group): the one-process worker then reads the scenario
from its cache, while a fresh process generates it again. Prints per-reset and per-episode medians (ms, as the
host sees them) and the ratios fresh / one process. Ratios, not thresholds: absolute numbers depend on the host.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this tree, whatever is installed

from env_registry.hosted import SandboxedEnv, SandboxedRunner  # noqa: E402
from sandbox.base import Sandbox  # noqa: E402


def _play(env: SandboxedEnv, seeds: list[int], plans: dict[int, list], repeat: int) -> tuple[list[float], list[float]]:
    runner = SandboxedRunner(env)
    resets, episodes = [], []
    for seed in seeds:
        for _ in range(repeat):
            start = time.perf_counter()
            runner.reset(seed)
            resets.append(time.perf_counter() - start)
            for turn in plans[seed]:
                if runner.step(turn).terminated:
                    break
            episodes.append(time.perf_counter() - start)
    return resets, episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--env", default="examples/envs/cancellation_eligibility.py")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    source = Path(args.env).read_text()
    seeds = list(range(args.episodes))
    results: dict[bool, tuple[list[float], list[float]]] = {True: ([], []), False: ([], [])}
    plans: dict[int, list] = {}
    for _ in range(args.rounds):
        for fresh in (False, True):
            Sandbox.fresh_processes = fresh
            with SandboxedEnv(source, backend=args.backend) as env:
                if not plans:
                    plans = {s: env.call("solution", {"seed": s, "which": "reference"}) for s in seeds}
                resets, episodes = _play(env, seeds, plans, args.repeat)
            results[fresh][0].extend(resets)
            results[fresh][1].extend(episodes)
    Sandbox.fresh_processes = True
    (fr, fe), (orr, oe) = ([statistics.median(v) * 1000 for v in results[m]] for m in (True, False))
    played = args.episodes * args.repeat * args.rounds
    print(f"{args.backend}, env {args.env}: {played} reference episodes per layout ({args.repeat} per seed), "
          f"rounds alternating")
    print(f"reset   one process {orr:7.1f} ms   fresh process {fr:7.1f} ms   fresh/one {fr / orr:.2f}x")
    print(f"episode one process {oe:7.1f} ms   fresh process {fe:7.1f} ms   fresh/one {fe / oe:.2f}x")


if __name__ == "__main__":
    main()
