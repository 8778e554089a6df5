"""Host side of the worker protocol's input: bytes from a sandboxed worker turned into bounded, clean messages.

Everything here treats the worker as hostile. Reading is linear in the size of what arrives (lines are
split by scanning only new bytes); a message has a byte cap; parsing never raises anything but
:class:`BadReply` (deep nesting, lone surrogates, huge integers, invalid UTF-8 all end there); strings come
out encodable (lone surrogates replaced) and nesting is bounded, so nothing downstream (pydantic, Rich,
``json.dumps`` of a report, a Hypothesis predicate's comparison) can crash on what a worker sent.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 100
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class BadReply(ValueError):
    """A worker sent something that is not a well-formed protocol message; the text says what."""


class LineSplitter:
    """Splits a byte stream into lines in time linear in its size, with a cap on one line's length."""

    def __init__(self, max_line: int = MAX_MESSAGE_BYTES) -> None:
        self.max_line = max_line
        self._parts: list[bytes] = []
        self._size = 0
        self.oversize = False  # the current line went over the cap: its bytes are being dropped

    def feed(self, data: bytes) -> list[bytes | None]:
        """Complete lines in ``data`` (None stands for a line that went over the cap)."""
        out: list[bytes | None] = []
        start = 0
        while True:
            nl = data.find(b"\n", start)
            piece = data[start:] if nl < 0 else data[start:nl]
            if not self.oversize:
                if self._size + len(piece) > self.max_line:
                    self.oversize, self._parts, self._size = True, [], 0
                else:
                    self._parts.append(piece)
                    self._size += len(piece)
            if nl < 0:
                return out
            out.append(None if self.oversize else b"".join(self._parts))
            self._parts, self._size, self.oversize = [], 0, False
            start = nl + 1


def parse_message(line: bytes) -> dict[str, Any]:
    """One protocol line -> a clean dict, or :class:`BadReply` saying what is wrong with it."""
    try:
        value = json.loads(line)
    except RecursionError:
        raise BadReply(f"a reply nested deeper than the parser allows ({len(line)} bytes)") from None
    except UnicodeDecodeError:
        raise BadReply("a reply that is not valid UTF-8") from None
    except ValueError as exc:  # includes integers with absurdly many digits
        raise BadReply(f"a line that is not JSON ({str(exc)[:120]}): {printable(line[:120])}") from None
    if not isinstance(value, dict):
        raise BadReply(f"a JSON {type(value).__name__} where a message object belongs")
    return clean(value, fix_strings=bool(_SURROGATE_ESCAPE.search(line)))


def clean(value: Any, fix_strings: bool = True, max_depth: int = MAX_DEPTH) -> Any:
    """``value`` (parsed JSON) with encodable strings, checked to nest at most ``max_depth`` deep.

    Iterative (no recursion limit to hit); lists and dicts are rebuilt only when a string in them changes.
    """
    root: list[Any] = [value]
    stack: list[tuple[Any, Any, int]] = [(root, 0, 0)]  # (container, key, depth)
    while stack:
        container, key, depth = stack.pop()
        item = container[key]
        if isinstance(item, str):
            if fix_strings and not item.isascii():
                container[key] = _encodable(item)
        elif isinstance(item, (list, dict)):
            if depth >= max_depth:
                raise BadReply(f"a reply nested more than {max_depth} levels deep")
            if isinstance(item, dict):
                if fix_strings and not all(k.isascii() for k in item):
                    item = {_encodable(k): v for k, v in item.items()}
                    container[key] = item
                stack.extend((item, k, depth + 1) for k in item)
            else:
                stack.extend((item, i, depth + 1) for i in range(len(item)))
    return root[0]


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _encodable(text: str) -> str:
    """Lone surrogates (JSON can spell them, UTF-8 cannot hold them) become U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def printable(data: bytes | str, limit: int = 200) -> str:
    """A short, repr-escaped form of worker output for an error message (no control characters)."""
    text = data.decode("utf-8", "replace") if isinstance(data, (bytes, bytearray)) else str(data)
    shown = repr(text[:limit])
    return shown + ("..." if len(text) > limit else "")

