"""A Gymnasium text space wide enough for real text.

Gymnasium's ``Text`` only admits letters and digits by default; agent observations carry JSON, punctuation,
newlines and any Unicode. ``AnyText`` admits every string up to ``max_length`` and samples printable text.
"""

from __future__ import annotations

import string
from typing import Any

from gymnasium.spaces import Text

SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n\téüß€→日本"


class AnyText(Text):
    """Any ``str`` of at most ``max_length`` characters (empty allowed)."""

    def __init__(self, max_length: int, *, seed: Any = None) -> None:
        super().__init__(max_length=max_length, min_length=0, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText(max_length={self.max_length})"
