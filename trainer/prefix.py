"""Which token sequences share a prefix, found from the tokens alone, so a shared prompt is computed once.

A group's K rollouts start from the same prompt; a hinted member's prompt differs from the others' only
after the system text; in the update, every member of a group starts with the same (un-hinted) prompt.
Nothing here knows how a prompt was rendered: sequences are sorted, neighbours compared token by token, and
a sequence joins the current cluster only when that costs fewer token positions than computing it alone
(cost of a cluster = its common prefix once + every member's remainder). Every prefix is at most a
member's length minus ``keep`` tokens, so each member still has tokens of its own to run (generation needs
the last prompt token's logits; the update needs at least one position per row).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

MIN_SHARED = 16
"""Shorter common prefixes are not worth a second forward pass."""


@dataclass
class Cluster:
    """Members (indices into the input) sharing their first ``length`` tokens."""

    members: list[int] = field(default_factory=list)
    length: int = 0


def common_length(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    """Length of the common prefix of ``a`` and ``b``, at most ``limit``."""
    n = min(len(a), len(b), limit)
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def shared_prefixes(sequences: Sequence[Sequence[int]], keep: int = 1, min_shared: int = MIN_SHARED) -> list[Cluster]:
    """Every sequence in exactly one cluster: members sharing at least ``min_shared`` tokens, or a sequence
    alone (its ``length`` then its own capped length). Deterministic: the same sequences, the same clusters."""
    order = sorted(range(len(sequences)), key=lambda i: (list(sequences[i]), i))
    clusters: list[Cluster] = []
    current: Cluster | None = None
    remainder = 0  # sum over current members of (length - prefix length)
    for index in order:
        seq = sequences[index]
        cap = max(0, len(seq) - keep)
        if current is not None:
            first = sequences[current.members[0]]
            joined = common_length(first, seq, min(current.length, cap))
            members = len(current.members)
            lengths = remainder + members * current.length  # the members' capped lengths
            cost_join = joined + (lengths + cap) - (members + 1) * joined
            cost_apart = current.length + remainder + cap
            if joined >= min_shared and cost_join <= cost_apart:
                remainder = (lengths + cap) - (members + 1) * joined
                current.members.append(index)
                current.length = joined
                continue
            clusters.append(current)
        current, remainder = Cluster([index], cap), 0
    if current is not None:
        clusters.append(current)
    for cluster in clusters:
        cluster.members.sort()
    return sorted(clusters, key=lambda c: c.members[0])


def worth_sharing(clusters: list[Cluster]) -> bool:
    """True when some cluster has two or more members (otherwise the plain batch is cheaper)."""
    return any(len(c.members) > 1 for c in clusters)


def owners(clusters: list[Cluster], n: int) -> list[int]:
    """For each of the ``n`` sequences, the index of its cluster."""
    owner = [0] * n
    for index, cluster in enumerate(clusters):
        for member in cluster.members:
            owner[member] = index
    return owner
