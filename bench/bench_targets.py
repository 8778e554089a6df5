"""Target adapter throughput, measured in one run: tool calls per second through the gym env against the same
MCP server called directly, and episodes per second with 1, 4 and 8 episodes in parallel.

    python bench/bench_targets.py [--domain retail] [--calls 200] [--episodes 24] [--json]

Tool calls: the same read-only call, alternately in blocks through ``TargetEnv.step`` (action parsing,
argument checks, the MCP client in its event-loop thread, transcript) and through a bare ``mcp`` client
session on a server of its own; the ratio is adapter / direct. Episodes: ``scripted:gold`` rollouts of the
first ``--episodes`` tasks with a shared, pre-computed gold cache, so every setting does the same work
(reset, gold calls, end-state hash). Ratios, not timings, are the result: absolute rates depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from env_registry.targets.catalog import TAU2_SERVERS, open_backend, resolve_target, spec_tasks  # noqa: E402
from env_registry.targets.env import TargetEnv  # noqa: E402
from env_registry.targets.runner import GoldCache  # noqa: E402
from factory.rollout.engine import Rollout, RolloutConfig  # noqa: E402

CALLS = {"airline": ("get_user_details", {"user_id": "mia_li_3668"}), "retail": ("get_user_details", {"user_id": "yusuf_rossi_9620"})}


def adapter_rate(domain: str, calls: int) -> float:
    name, arguments = CALLS[domain]
    env = TargetEnv(f"tau2-{domain}", task_id="0", max_steps=calls + 10, max_errors=calls + 10)
    try:
        env.reset(seed=0)
        action = {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}
        started = time.perf_counter()
        for _ in range(calls):
            env.step(action)
        return calls / (time.perf_counter() - started)
    finally:
        env.close()


def direct_rate(domain: str, calls: int) -> float:
    from mcp import Client, StdioServerParameters

    package, state_env, _ = TAU2_SERVERS[domain]
    name, arguments = CALLS[domain]

    async def run() -> float:
        with tempfile.TemporaryDirectory() as state_dir:
            params = StdioServerParameters(command=sys.executable, args=["-m", f"{package}.server"], env={state_env: state_dir})
            async with Client(params) as client:
                await client.call_tool("reset_state", {"state_key": "bench"})
                started = time.perf_counter()
                for _ in range(calls):
                    await client.call_tool(name, {**arguments, "state_key": "bench"})
                return calls / (time.perf_counter() - started)

    return anyio.run(run)


def episode_rates(domain: str, episodes: int, workdir: Path) -> dict[int, float]:
    spec = resolve_target(f"tau2-{domain}", backend="mcp")
    tasks = spec_tasks(spec)[:episodes]
    gold = GoldCache()
    backend = open_backend(spec)
    try:
        for task in tasks:  # pre-compute the gold replays: every setting then does the same work
            gold.get((backend.describe(), task.version), lambda task=task: backend.replay(task.gold_actions))
    finally:
        backend.close()
    rates = {}
    for parallel in (1, 4, 8):
        config = RolloutConfig(
            target=f"tau2-{domain}", backend="mcp", policy="scripted:gold", task_ids=[t.id for t in tasks],
            concurrency=parallel, out=workdir / f"p{parallel}",
        )  # fmt: skip
        started = time.perf_counter()
        summary = Rollout(config, gold_cache=gold).run()
        elapsed = time.perf_counter() - started
        assert summary.episodes == len(tasks) and summary.errors == 0, summary
        rates[parallel] = len(tasks) / elapsed
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", choices=sorted(CALLS), default="retail")
    parser.add_argument("--calls", type=int, default=200, help="tool calls per block (two blocks each way)")
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    half = max(1, args.calls // 2)
    adapter, direct = [], []
    for _ in range(2):  # alternate, so a change in machine load hits both sides
        direct.append(direct_rate(args.domain, half))
        adapter.append(adapter_rate(args.domain, half))
    adapter_cps, direct_cps = sum(adapter) / len(adapter), sum(direct) / len(direct)
    with tempfile.TemporaryDirectory() as workdir:
        rates = episode_rates(args.domain, args.episodes, Path(workdir))
    result = {
        "domain": args.domain,
        "tool_calls_per_s": {"adapter": round(adapter_cps, 2), "direct": round(direct_cps, 2), "ratio": round(adapter_cps / direct_cps, 3)},
        "episodes_per_s": {str(k): round(v, 3) for k, v in rates.items()},
        "episode_speedup": {str(k): round(v / rates[1], 2) for k, v in rates.items()},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"τ² {args.domain} over MCP")
    print(f"tool calls/s   adapter {adapter_cps:8.2f}   direct {direct_cps:8.2f}   adapter/direct {adapter_cps / direct_cps:6.3f}")
    print(f"{'parallel':>10}{'episodes/s':>14}{'x one':>8}")
    for parallel, rate in rates.items():
        print(f"{parallel:>10}{rate:>14.3f}{rate / rates[1]:>8.2f}")


if __name__ == "__main__":
    main()
