"""Capability discovery: an analysis LLM contrasts sampled successful and failed trajectories and proposes
a dictionary of capabilities (snake_case name, description, example failing trajectory ids).

The built-in catalogue can seed it (the model is shown the known capabilities, reuses their names for the
same ideas and adds what they miss) or replace it (no LLM call at all).
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel, Field

from factory.analyze.render import render_trajectory
from llm_clients.base import LLMClient
from llm_clients.structured import complete_structured
from schemas.capability import Capability
from schemas.trajectory import Trajectory

CatalogueMode = Literal["seed", "only", "off"]

SYSTEM = (
    "You analyse transcripts of a tool-using customer-service agent to find the capabilities it lacks. "
    "A capability is a reusable skill (not a single task), e.g. checking a policy precondition before acting. "
    "You answer with JSON only."
)


class _Proposal(BaseModel):
    name: str
    description: str
    example_failure_ids: list[str] = Field(default_factory=list)


class _Reply(BaseModel):
    capabilities: list[_Proposal]


def sample_for_discovery(trajectories: list[Trajectory], per_group: int, seed: int) -> tuple[list[Trajectory], list[Trajectory]]:
    rng = random.Random(seed)
    successes = [t for t in trajectories if t.success]
    failures = [t for t in trajectories if not t.success]
    return (
        rng.sample(successes, min(per_group, len(successes))),
        rng.sample(failures, min(per_group, len(failures))),
    )


def discovery_prompt(successes: list[Trajectory], failures: list[Trajectory], known: list[Capability]) -> str:
    parts = [
        "Below are successful and failed trajectories of the same agent on the same kind of tasks. Compare them "
        "and propose the capabilities whose absence best explains the failures: skills that are visibly lacking in "
        "many failures and mostly present in successes.",
    ]
    if known:
        parts.append(
            "Known capabilities (reuse these exact names when you mean the same skill; add new ones only for skills "
            "they do not cover):\n" + "\n".join(f"- {c.name}: {c.description}" for c in known)
        )
    parts.append("## Successful trajectories\n" + "\n\n".join(render_trajectory(t, show_outcome=True) for t in successes))
    parts.append("## Failed trajectories\n" + "\n\n".join(render_trajectory(t, show_outcome=True) for t in failures))
    parts.append(
        'Reply with JSON only: {"capabilities": [{"name": "snake_case_name", "description": "one or two sentences '
        'saying what the skill is and how its absence shows", "example_failure_ids": ["ids of failed trajectories '
        'above that lack it"]}]}. Propose between 3 and 10 capabilities.'
    )
    return "\n\n".join(parts)


def discover_capabilities(
    client: LLMClient,
    trajectories: list[Trajectory],
    *,
    seed_catalogue: list[Capability] | None = None,
    per_group: int = 12,
    seed: int = 0,
    max_attempts: int = 3,
) -> list[Capability]:
    """Proposed capabilities, merged after the seed catalogue (a seed name keeps its own description)."""
    successes, failures = sample_for_discovery(trajectories, per_group, seed)
    known = list(seed_catalogue or [])
    failure_ids = {t.id for t in failures}

    def check(reply: _Reply) -> None:
        if not reply.capabilities:
            raise ValueError("capabilities: the list is empty")
        for number, proposal in enumerate(reply.capabilities):
            try:
                Capability(name=proposal.name, description=proposal.description)
            except ValueError:
                raise ValueError(
                    f"capabilities[{number}].name: {proposal.name!r} is not snake_case (lowercase letters, digits, '_', 2-64 chars)"
                ) from None

    reply, _ = complete_structured(
        client,
        [{"role": "user", "content": discovery_prompt(successes, failures, known)}],
        _Reply,
        system=SYSTEM,
        check=check,
        max_attempts=max_attempts,
        max_tokens=4096,
    )
    merged: dict[str, Capability] = {c.name: c.model_copy(deep=True) for c in known}
    for proposal in reply.capabilities:
        examples = [i for i in proposal.example_failure_ids if i in failure_ids]
        if proposal.name in merged:
            current = merged[proposal.name]
            current.example_failure_ids = list(dict.fromkeys(current.example_failure_ids + examples))
        else:
            merged[proposal.name] = Capability(name=proposal.name, description=proposal.description.strip(), example_failure_ids=examples)
    return list(merged.values())
