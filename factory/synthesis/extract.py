"""Find the env module in an LLM reply, whatever prose, fences or extra snippets surround it."""

from __future__ import annotations

from schemas.errors import FactoryError

import ast
import re

_FENCE = re.compile(r"```[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)(?:\n```|\Z)", re.DOTALL)


class NoCodeError(FactoryError, ValueError):
    """The reply holds no usable env module; the message is fed back to the model as a repair round."""


def _score(block: str) -> tuple[int, int]:
    """Prefer the block that defines an env (a TaskEnv subclass), then the longest one."""
    defines_env = "TaskEnv" in block and "class " in block
    return (1 if defines_env else 0, len(block))


def extract_env_code(reply: str) -> str:
    """The Python source of the env module in ``reply``.

    Fenced blocks are preferred (```python or bare fences, an unterminated last fence included); of several,
    the one defining a ``TaskEnv`` subclass wins, then the longest. A reply that is nothing but code is taken
    whole. Prose-only replies raise :class:`NoCodeError`.
    """
    blocks = [m.group("body") for m in _FENCE.finditer(reply or "") if m.group("lang").lower() in ("", "python", "py", "python3")]
    blocks = [b.strip("\n") for b in blocks if b.strip()]
    if blocks:
        best = max(blocks, key=_score)
        if "TaskEnv" not in best:
            raise NoCodeError(
                "the code in your reply does not define an env: write one complete module with a subclass of "
                "sdk.TaskEnv, in a single ```python fenced block"
            )
        return best + "\n"
    text = (reply or "").strip()
    if "TaskEnv" in text:
        try:
            ast.parse(text)
            return text + "\n"
        except SyntaxError:
            pass
    raise NoCodeError(
        "your reply contains no Python code block: answer with the complete env module in one ```python fenced block"
    )
