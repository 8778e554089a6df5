"""Labeling: for every trajectory and capability, NA, PRESENT or LACKING with a short reason, N times.

The LLM labeler sends batches of trajectories (all capabilities per call), runs calls concurrently up to a
limit, and re-asks when a reply is malformed or incomplete. Calls go through the client's response cache, so
a rerun costs nothing; to keep the N runs independent despite the cache, each run's prompt names its pass and
lists capabilities and trajectories in a different (seeded) order. Labeling is blind to the outcome: the
model never sees whether a trajectory succeeded, so Δ cannot come from that knowledge.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Literal, Protocol

from pydantic import BaseModel

from factory.analyze.render import render_trajectory
from llm_clients.base import LLMClient
from llm_clients.structured import MalformedReplyError, complete_structured
from schemas.capability import Capability, CapabilityLabel, TrajectoryLabel
from schemas.trajectory import Trajectory

Progress = Callable[[int, int], None]

SYSTEM = (
    "You label transcripts of a tool-using customer-service agent. For each trajectory and each capability "
    "decide: NA if the conversation gave the agent no occasion to use the capability; PRESENT if it was needed "
    "and the agent showed it; LACKING if it was needed and the agent did not show it or misapplied it. Judge from "
    "the tool calls, tool results and replies only. Give a short reason (at most 25 words). Answer with JSON only."
)


class Labeler(Protocol):
    name: str
    deterministic: bool


class _Item(BaseModel):
    trajectory_id: str
    capability: str
    label: Literal["NA", "PRESENT", "LACKING"]
    reason: str = ""


class _Reply(BaseModel):
    labels: list[_Item]


class LLMLabeler:
    """Labels with an analysis LLM; ``failed_batches`` counts batches filled with NA after malformed replies."""

    deterministic = False

    def __init__(self, client: LLMClient, *, max_attempts: int = 3, seed: int = 0, temperature: float = 0.7) -> None:
        self.client = client
        self.max_attempts = max_attempts
        self.seed = seed
        self.temperature = temperature
        self.failed_batches = 0
        self.name = client.describe()

    def prompt(self, batch: list[Trajectory], capabilities: list[Capability], run: int) -> str:
        rng = random.Random(f"{self.seed}:{run}:{batch[0].id}")
        caps = list(capabilities)
        trajs = list(batch)
        rng.shuffle(caps)
        rng.shuffle(trajs)
        parts = [
            f"Labeling pass {run + 1}.",
            "## Capabilities\n" + "\n".join(f"- {c.name}: {c.description}" for c in caps),
            "## Trajectories\n" + "\n\n".join(render_trajectory(t, show_outcome=False) for t in trajs),
            'Reply with JSON only: {"labels": [{"trajectory_id": "...", "capability": "...", "label": '
            '"NA" | "PRESENT" | "LACKING", "reason": "..."}]} with exactly one entry for every trajectory and '
            f"capability pair ({len(trajs)} x {len(caps)} = {len(trajs) * len(caps)} entries).",
        ]
        return "\n\n".join(parts)

    def label_batch(self, batch: list[Trajectory], capabilities: list[Capability], run: int) -> list[TrajectoryLabel]:
        expected = {(t.id, c.name) for t in batch for c in capabilities}

        def check(reply: _Reply) -> None:
            seen: set[tuple[str, str]] = set()
            for number, item in enumerate(reply.labels):
                pair = (item.trajectory_id, item.capability)
                if pair not in expected:
                    raise ValueError(f"labels[{number}]: unknown trajectory_id/capability pair {pair}")
                if pair in seen:
                    raise ValueError(f"labels[{number}]: duplicate entry for {pair}")
                seen.add(pair)
            missing = sorted(expected - seen)
            if missing:
                raise ValueError(f"{len(missing)} pair(s) missing, e.g. {missing[:3]}")

        try:
            reply, _ = complete_structured(
                self.client,
                [{"role": "user", "content": self.prompt(batch, capabilities, run)}],
                _Reply,
                system=SYSTEM,
                check=check,
                max_attempts=self.max_attempts,
                max_tokens=min(8192, 256 + 80 * len(expected)),
                temperature=self.temperature,
            )
        except MalformedReplyError as exc:
            self.failed_batches += 1
            reason = f"labeling failed: {str(exc)[:120]}"
            return [TrajectoryLabel(trajectory_id=t, capability=c, label=CapabilityLabel.NA, reason=reason) for t, c in sorted(expected)]
        return [
            TrajectoryLabel(trajectory_id=i.trajectory_id, capability=i.capability, label=CapabilityLabel(i.label), reason=i.reason)
            for i in reply.labels
        ]


def _batches(items: list[Trajectory], size: int) -> list[list[Trajectory]]:
    return [items[i : i + size] for i in range(0, len(items), max(1, size))]


def label_runs_llm(
    labeler: LLMLabeler,
    trajectories: list[Trajectory],
    capabilities: list[Capability],
    runs: int,
    *,
    batch_size: int = 4,
    concurrency: int = 8,
    progress: Progress | None = None,
) -> list[list[TrajectoryLabel]]:
    """N independent labeling runs; any non-malformation LLM error (auth, exhausted retries) aborts."""
    jobs = [(run, batch) for run in range(runs) for batch in _batches(trajectories, batch_size)]
    out: list[list[TrajectoryLabel]] = [[] for _ in range(runs)]
    done = 0
    if progress:
        progress(0, len(jobs))
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = {pool.submit(labeler.label_batch, batch, capabilities, run): run for run, batch in jobs}
        try:
            for future in as_completed(futures):
                out[futures[future]].extend(future.result())
                done += 1
                if progress:
                    progress(done, len(jobs))
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return out


def label_runs_offline(
    labeler, trajectories: list[Trajectory], capabilities: list[Capability], *, progress: Progress | None = None
) -> list[list[TrajectoryLabel]]:
    """The offline labeler is deterministic: one run, since more would only repeat its labels."""
    names = [c.name for c in capabilities]
    labels: list[TrajectoryLabel] = []
    total = len(trajectories)
    step = max(1, total // 100)
    for number, trajectory in enumerate(trajectories, start=1):
        labels.extend(labeler.label(trajectory, names))
        if progress and (number % step == 0 or number == total):
            progress(number, total)
    return [labels]
