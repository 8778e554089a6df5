"""The one rule for a capability name, shared by the gate, ``factory build``, the registry, the router and gym ids.

A capability name becomes a folder name in the registry, part of a gym id (``trace/<name>-v<N>``), an adapter
folder name and a label in reports, so it must be safe in all of them at once: lower-case ASCII letters,
digits and ``_``, starting with a letter, 2 to 64 characters. ``../../x``, an empty name, a 300-character
name, ``-v3`` suffixes and anything a shell or a file system would read specially are refused.
"""

from __future__ import annotations

import re

CAPABILITY_PATTERN = r"^[a-z][a-z0-9_]{1,63}$"
"""The pattern, for pydantic ``Field(pattern=...)`` and JSON Schema."""
CAPABILITY_RULE = "lower-case letters, digits and _, starting with a letter, 2-64 characters"
"""The rule in words, for error messages."""

_CAPABILITY = re.compile(CAPABILITY_PATTERN)


def is_capability_name(name: object) -> bool:
    """Whether ``name`` is a string that satisfies the rule (``fullmatch``: no trailing newline slips through)."""
    return isinstance(name, str) and _CAPABILITY.fullmatch(name) is not None


def capability_problem(name: object) -> str | None:
    """None for a good name, else one line saying what is wrong with it (shortened: it may be 300 characters)."""
    if is_capability_name(name):
        return None
    shown = repr(name) if not isinstance(name, str) or len(name) <= 40 else f"{name[:37]!r}... ({len(name)} characters)"
    return f"{shown} is not a capability name ({CAPABILITY_RULE}: '{CAPABILITY_PATTERN}')"
