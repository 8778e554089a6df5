"""Errors of the target adapters: one root, and one branch for failures that are not the agent's fault.

A :class:`TargetInfraError` ends the episode it happens in with a recorded ``infrastructure_error``; the
rollout engine counts it and never scores it as the agent's failure.
"""

from __future__ import annotations


class TargetError(RuntimeError):
    """A target could not do what was asked; the message says what is wrong and how to fix it."""


class TargetConfigError(TargetError, ValueError):
    """Bad input: an unknown target or task id, an unreadable task file, a missing optional package."""


class TargetInfraError(TargetError):
    """The target itself failed (it did not start, died, hung or answered garbage)."""

    kind = "infrastructure"


class TargetStartError(TargetInfraError):
    kind = "start"


class TargetDiedError(TargetInfraError):
    kind = "died"


class TargetTimeoutError(TargetInfraError):
    kind = "timeout"


class TargetProtocolError(TargetInfraError):
    """The target answered, but not with what the protocol promises (malformed JSON, missing fields)."""

    kind = "protocol"
