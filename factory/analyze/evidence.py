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
from typing import Any

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


def same_record(a: object, b: object) -> bool:
    """Whether two ids name the same record, or one is the other mistyped by one character: an attempt on a
    typo of an id is still an attempt at that record (the typo is tool_calling_precision's to label)."""
    x, y = str(a or "").lstrip("#"), str(b or "").lstrip("#")
    return bool(x) and len(x) == len(y) and sum(c != d for c, d in zip(x, y)) <= 1


def blind(trajectory: Trajectory) -> Trajectory:
    """The trajectory without anything that tells or implies the outcome."""
    metadata = {k: v for k, v in trajectory.metadata.items() if k not in OUTCOME_KEYS}
    return trajectory.model_copy(update={"reward": 0.0, "success": False, "metadata": metadata})


RECORD, POLICY, TEXT = 0.9, 0.85, 0.7
"""How far a finding is trusted, by what it rests on: a call that contradicts a record the agent had read
(``RECORD``), the domain policy applied to those records (``POLICY``), or English the rules had to read: a
claim, a refusal, a request (``TEXT``). Labels carry their finding's confidence and the selection weighs them
by it."""
ABSTAIN = 0.5
"""A finding below this confidence is evidence, not a verdict: the label is NA with ``abstained`` set."""


@dataclass
class Finding:
    """One judgement of one capability at one point of the episode: the rule, the message it is about and the
    values compared, so the label can be checked by a reader."""

    capability: str
    label: CapabilityLabel
    reason: str
    rule: str = ""
    at: int | None = None
    values: dict[str, Any] = field(default_factory=dict)
    confidence: float = POLICY


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
    rule: str = ""  # the rule being run: the default rule name of its findings
    _worlds: dict[tuple[int, ...], World] = field(default_factory=dict, repr=False)

    @cached_property
    def instructions(self) -> str:
        """The user's instructions without the evaluation criteria (the labeler never sees gold)."""
        return self.task.text() if self.task is not None else ""

    @cached_property
    def writes(self) -> list[AgentCall]:
        """Successful state-changing calls, in order."""
        return [c for c in self.calls if c.succeeded and self.catalog.is_write(c.name)]

    def world_before(self, message_index: int) -> World:
        """Records the agent had read before a message (a call's own message index for a call). Built once per
        distinct set of results; callers must not change it."""
        seen = tuple(c.position for c in self.calls if c.result_index is not None and c.result_index < message_index)
        world = self._worlds.get(seen)
        if world is None:
            world = World(now=self.now)
            for call in self.calls:
                if call.position in seen:
                    world.apply(call)
            self._worlds[seen] = world
        return world

    @cached_property
    def first_seen(self) -> World:
        """Every record as the agent first read it (a later read or a write's result does not replace it): the
        state the user's request was about."""
        world = World(now=self.now)
        for call in self.calls:
            if call.succeeded and not self.catalog.is_write(call.name):
                reservations, orders = dict(world.reservations), dict(world.orders)
                world.apply(call)
                world.reservations.update(reservations)
                world.orders.update(orders)
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

    def add(self, capability: str, label: CapabilityLabel, reason: str, *, rule: str = "", at: int | None = None,
            values: dict[str, Any] | None = None, confidence: float = POLICY) -> None:  # fmt: skip
        self.findings.append(Finding(capability, label, reason, rule or self.rule, at, dict(values or {}), confidence))

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
