"""A Gymnasium text space wide enough for real text.

Gymnasium's ``Text`` only admits letters and digits by default; agent observations carry JSON, punctuation,
newlines and any Unicode. ``AnyText`` admits every string up to ``max_length`` and samples printable text,
and brings its own shared-memory codec so async vector envs pass it through intact.
"""

from __future__ import annotations

import multiprocessing as mp
import string
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium.spaces import Text
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n\téüß€→日本"


class AnyText(Text):
    """Any ``str`` of at most ``max_length`` characters (empty allowed)."""

    def __init__(self, max_length: int, *, seed: Any = None) -> None:
        super().__init__(max_length=max_length, min_length=0, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText(max_length={self.max_length})"


# --- async vector envs ------------------------------------------------------------------------------
# ``gym.make_vec(..., vectorization_mode="async")`` passes observations through shared memory by default, and
# Gymnasium's codec for ``Text`` stores indices into the sampling charset: characters outside it, and the
# padding of every shorter string, come back as garbage (2,000,000-character strings), and the vector env
# keeps the tuple it decoded once at start-up. Our text travels as UTF-32 code points behind a length slot,
# decoded when looked at, so async vector envs are correct by default.


@create_shared_memory.register(AnyText)
def _create_any_text_memory(space: AnyText, n: int = 1, ctx: ModuleType = mp) -> Any:
    return ctx.Array(np.dtype(np.uint32).char, n * (space.max_length + 1))


@write_to_shared_memory.register(AnyText)
def _write_any_text(space: AnyText, index: int, value: str, shared_memory: Any) -> None:
    if not space.contains(value):
        raise ValueError(f"observation is not a str of at most {space.max_length} characters: {type(value).__name__}")
    width = space.max_length + 1
    row = np.frombuffer(shared_memory.get_obj(), dtype=np.uint32)[index * width: (index + 1) * width]
    codes = np.frombuffer(value.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    row[0] = len(codes)
    row[1: 1 + len(codes)] = codes


class SharedTexts(Sequence[str]):
    """The async vector env's observations, read from shared memory when looked at.

    ``AsyncVectorEnv`` reads its observation buffer once, expecting a live view (numpy arrays are); text must
    be decoded, so this view decodes on access. ``deepcopy`` (what the vector env returns by default) gives a
    plain tuple of the strings as they are now."""

    def __init__(self, rows: np.ndarray) -> None:
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self)[index]
        row = self._rows[index]
        return row[1: 1 + int(row[0])].tobytes().decode("utf-32-le", "surrogatepass")

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, Sequence) else other)

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@read_from_shared_memory.register(AnyText)
def _read_any_text(space: AnyText, shared_memory: Any, n: int = 1) -> SharedTexts:
    return SharedTexts(np.frombuffer(shared_memory.get_obj(), dtype=np.uint32).reshape((n, space.max_length + 1)))
