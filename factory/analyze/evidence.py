"""Everything the offline rules look at, computed once per trajectory: the agent's calls and results, what
was said, the task's instructions, the policy's clock and the world as the agent saw it at each step.

The evidence is built from a *blind* copy of the trajectory (:func:`blind`): no reward, no success flag, no
reward breakdown, no gold. So no rule can leak the outcome into a label, whatever it is written to do.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

from factory.analyze.calls import AgentCall, agent_calls
from factory.analyze.conversation import Utterance, refusals, utterances
from factory.analyze.tasks import TaskSpec, trajectory_domain
from factory.analyze.toolinfo import ToolCatalog, catalog_for
from factory.analyze.world import World, policy_now
from schemas.capability import CapabilityLabel
from schemas.trajectory import Trajectory
from trace_env import targets

NA, PRESENT, LACKING = CapabilityLabel.NA, CapabilityLabel.PRESENT, CapabilityLabel.LACKING
OUTCOME_KEYS = ("reward_detail", "reward_missing", "task", "gold_actions", "reward_info")


def blind(trajectory: Trajectory) -> Trajectory:
    """The trajectory without anything that tells or implies the outcome."""
    metadata = {k: v for k, v in trajectory.metadata.items() if k not in OUTCOME_KEYS}
    return trajectory.model_copy(update={"reward": 0.0, "success": False, "metadata": metadata})


@dataclass
class Finding:
    """One judgement of one capability at one point of the episode."""

    capability: str
    label: CapabilityLabel
    reason: str


@dataclass
class Evidence:
    trajectory: Trajectory
    catalog: ToolCatalog
    task: TaskSpec | None
    calls: list[AgentCall]
    said: list[Utterance]
    now: str
    domain: str | None
    findings: list[Finding] = field(default_factory=list)

    @cached_property
    def instructions(self) -> str:
        """The user's instructions without the evaluation criteria (the labeler never sees gold)."""
        return self.task.text() if self.task is not None else ""

    @cached_property
    def writes(self) -> list[AgentCall]:
        """Successful state-changing calls, in order."""
        return [c for c in self.calls if c.succeeded and self.catalog.is_write(c.name)]

    def world_before(self, message_index: int) -> World:
        """Records the agent had read before a message (a call's own message index for a call)."""
        world = World(now=self.now)
        for call in self.calls:
            if call.result_index is not None and call.result_index < message_index:
                world.apply(call)
        return world

    @cached_property
    def final_world(self) -> World:
        return self.world_before(len(self.trajectory.messages) + 1)

    def user_text_before(self, message_index: int) -> str:
        return "\n".join(u.text for u in self.said if u.role == "user" and u.index < message_index)

    def agent_text_before(self, message_index: int, last: int = 3) -> str:
        texts = [u.text for u in self.said if u.role == "assistant" and u.index < message_index]
        return "\n".join(texts[-last:])

    def later_writes(self, message_index: int, name: str | None = None) -> list[AgentCall]:
        return [c for c in self.writes if c.message_index > message_index and (name is None or c.name == name)]

    def add(self, capability: str, label: CapabilityLabel, reason: str) -> None:
        self.findings.append(Finding(capability, label, reason))

    def refusals(self) -> Iterator[tuple[Utterance, World, str, str]]:
        """(message, world the agent had seen, action refused, sentence) for every refusal the agent made."""
        for utterance in self.said:
            if utterance.role != "assistant":
                continue
            found = refusals(utterance.text)
            if found:
                world = self.world_before(utterance.index)
                for action, sentence in found:
                    yield utterance, world, action, sentence


def _now(trajectory: Trajectory) -> str:
    """The policy's clock: from the policy the run used (τ² files carry it), else the shipped profile's."""
    now = trajectory.metadata.get("policy_now")
    if isinstance(now, str) and now:
        return now
    profile = re.sub(r"^tau-bench-", "tau2-", trajectory.target)
    try:
        return policy_now(targets.policy(profile))
    except KeyError:
        return policy_now(None)


def build_evidence(trajectory: Trajectory, task: TaskSpec | None) -> Evidence:
    seen = blind(trajectory)
    if task is not None:
        task = task.model_copy(update={"gold_actions": None})  # the task as the user knew it: no gold
    tools = trajectory.metadata.get("tools") if isinstance(trajectory.metadata.get("tools"), list) else None
    return Evidence(
        trajectory=seen,
        catalog=catalog_for(trajectory.target, tools),
        task=task,
        calls=agent_calls(seen),
        said=utterances(seen),
        now=_now(trajectory),
        domain=trajectory_domain(trajectory),
    )
