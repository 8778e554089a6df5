"""Median step latency of a blueprint env: in-process vs each sandbox backend, measured in one run; and the
host-side check of one step's reply, before and after it was made once at the wall (interleaved, one run).

    python bench/bench_env_step.py [--capability precondition_verification] [--episodes 30]

Prints the medians and the ratio of each sandboxed step to the in-process step (a ratio, not a timing
threshold: absolute numbers depend on the machine). The second table replays the reference episodes' step
replies through the host's checks: "before" is the old path (the wall checked ``info`` as an untyped dict,
then the trainer validated the messages itself), "after" the current one (``schemas.wire.check_reply``
checks ``info`` once, ``trainer.envpool`` reuses it); "wall only" is what callers other than the trainer pay
(the gate, rollouts through Gymnasium). Each reply is timed every way, alternately.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this tree, whatever is installed

from trace_env.loader import load_env
from trace_env.engine import EpisodeRunner
from env_registry.hosted import SandboxedEnv, SandboxedRunner
from factory.blueprints import blueprint_source
from sandbox import available_backends
from schemas.wire import StepInfo, StepReply, check_reply
from trainer.envpool import _checked


class UntypedStepReply(StepReply):
    """The wall's step model before ``StepInfo``: ``info`` was any dict (for the "before" column only)."""

    info: dict[str, Any]  # type: ignore[assignment]


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


def step_replies(env: Any, episodes: int) -> list[dict[str, Any]]:
    """The reference episodes' reset and step replies, as the worker sends them (through JSON)."""
    runner, replies = EpisodeRunner(env), []
    for seed in range(episodes):
        result = runner.reset(seed)
        replies.append(result)
        for turn in env.reference_solution(env.generate(seed)):
            result = runner.step(turn)
            replies.append(result)
            if result.terminated or result.truncated:
                break
    fields = ("observation", "reward", "terminated", "truncated", "info")
    return [json.loads(json.dumps(dict(zip(fields, (r.observation, r.reward, r.terminated, r.truncated, r.info))))) for r in replies]


def before(reply: dict[str, Any]) -> Any:
    data = UntypedStepReply.model_validate(reply).model_dump(exclude_unset=True)
    return StepInfo.model_validate(data["info"]), data["reward"], data["terminated"], data["truncated"]  # the trainer's old check


def after(reply: dict[str, Any]) -> Any:
    data = check_reply("step", reply)
    return _checked(data["reward"], data["terminated"], data["truncated"], data["info"]).reply


def wall_before(reply: dict[str, Any]) -> Any:
    return UntypedStepReply.model_validate(reply).model_dump(exclude_unset=True)


def wall_after(reply: dict[str, Any]) -> Any:
    return check_reply("step", reply)


PATHS = {"trainer, before": before, "trainer, after": after, "wall only, before": wall_before, "wall only, after": wall_after}


def host_check(replies: list[dict[str, Any]], rounds: int = 20) -> dict[str, float]:
    """Median microseconds per reply of each host-side path, the paths timed alternately on each reply. The
    trainer's path is the wall's check and then its own; "wall only" is what every other caller pays
    (the gate, rollouts through Gymnasium)."""
    times: dict[str, list[float]] = {name: [] for name in PATHS}
    for _ in range(rounds):
        for reply in replies:
            for name, path in PATHS.items():
                started = time.perf_counter()
                path(reply)
                times[name].append((time.perf_counter() - started) * 1e6)
    return {name: statistics.median(values) for name, values in times.items()}


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
    replies = step_replies(local_env, args.episodes)
    medians = host_check(replies)
    print(f"host-side check of a reset/step reply ({len(replies)} replies x 20, interleaved)")
    print(f"{'path':<20}{'median us':>12}{'x before':>14}")
    for name, median in medians.items():
        print(f"{name:<20}{median:>12.1f}{median / medians[name.replace('after', 'before')]:>14.2f}")


if __name__ == "__main__":
    main()
