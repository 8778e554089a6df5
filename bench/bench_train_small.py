"""Seconds per GRPO iteration of the README's CPU example (``--groups 1 --group-size 2``, 16 new tokens a turn)
against the trainer's full-size defaults (G = 4, K = 8, 512 tokens), on the tiny model and the
precondition_verification blueprint, alternating the two so both see the same machine load.

    python bench/bench_train_small.py [--repeats 1] [--sandbox bwrap]

Prints each run's s/iteration (from the run's summary.json) and the ratio default / small.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--groups", "1", "--group-size", "2", "--set", "rollout.max_new_tokens=16"]


def run(args: list[str], env: dict[str, str]) -> float:
    done = subprocess.run([sys.executable, "-m", "factory.cli", "train", *args, "--json"], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"factory train failed ({done.returncode}): {done.stderr[-800:]}")
    return float(json.loads(done.stdout)["summary"]["s_per_iteration"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--sandbox", default="bwrap")
    options = parser.parse_args()
    from trainer.tiny_model import ensure_tiny_model

    model = ensure_tiny_model()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(REPO), "TRACE_FACTORY_REGISTRY": str(Path(tmp) / "registry")}
        built = subprocess.run([sys.executable, "-m", "factory.cli", "build", "-c", "precondition_verification", "--sandbox",
                                options.sandbox, "--json"], capture_output=True, text=True, env=env)  # fmt: skip
        if built.returncode != 0:
            raise SystemExit(f"factory build failed: {built.stderr[-800:]}")
        small, full = [], []
        for i in range(options.repeats):
            base = ["precondition_verification", "--model", str(model), "--iterations", "1", "--sandbox", options.sandbox, "--set", "threads=1"]
            small.append(run([*base, "--output", f"{tmp}/small{i}", *SMALL], env))
            full.append(run([*base, "--output", f"{tmp}/full{i}"], env))
            print(f"repeat {i}: small {small[-1]:.1f} s/iteration, defaults {full[-1]:.1f} s/iteration", flush=True)
    s, f = sum(small) / len(small), sum(full) / len(full)
    print(f"README CPU example: {s:.1f} s/iteration; defaults: {f:.1f} s/iteration; defaults / small = {f / s:.1f}x")


if __name__ == "__main__":
    main()
