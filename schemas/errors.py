"""The root of every error the project raises on purpose, and the one way a pydantic error is said to a user.

Callers catch one type and the CLI prints one line. It lives at the bottom of the host side so that every
package (the trainer, the router, the LLM clients) raises under the same root without importing the CLI.

Two more roots carry the exit-code contract (``factory.cli.exits``) down to code that knows nothing of the CLI:
:class:`InputError` is bad input (exit 2: the user's to fix), :class:`Interrupted` is a stop by a signal
(exit 128 + the signal's number: 130 for Ctrl-C, 143 for SIGTERM).
"""

from __future__ import annotations

import difflib
import signal
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError


class FactoryError(Exception):
    """A factory step could not do what was asked; the message says what is wrong and how to fix it."""


class InputError(FactoryError):
    """Bad input: a name, file, folder or setting the user gave cannot be used (exit 2); the message says how to fix it."""


class Interrupted(KeyboardInterrupt):
    """A command was stopped by a signal (Ctrl-C, or SIGTERM from a batch system or ``timeout``).

    A ``KeyboardInterrupt``, so every path that keeps finished work on Ctrl-C keeps it on SIGTERM too;
    ``signum`` says which signal, so the exit code can say it as well (128 + signum).
    """

    def __init__(self, signum: int = signal.SIGINT, message: str = "") -> None:
        super().__init__(message or signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def interrupt_exit_code(exc: BaseException) -> int:
    """130 for Ctrl-C (a plain ``KeyboardInterrupt``), 128 + signum for an :class:`Interrupted`."""
    return exc.exit_code if isinstance(exc, Interrupted) else 128 + int(signal.SIGINT)


def _where(loc: tuple[Any, ...]) -> str:
    """A location as a reader writes it: ``grpo.lr``, ``messages[2].role``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _fields_at(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> list[str]:
    """The field names of the model that ``loc``'s parent points into (for "did you mean")."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        args = getattr(field.annotation, "__args__", ())
        candidates = [field.annotation, *args, *(a for arg in args for a in getattr(arg, "__args__", ()))]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    return list(getattr(current, "model_fields", {}))


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_lines(exc: ValidationError, model: type[BaseModel] | None = None,
                where: Callable[[tuple[Any, ...]], str] | None = None) -> list[str]:  # fmt: skip
    """Each error of ``exc`` as ``location: problem (got INPUT)``, as pydantic lists them. With ``model`` (the
    model validated), an unknown key names the known key it most probably meant. ``where(loc)`` names a location
    the caller's way (a CLI flag for a field), else it reads ``grpo.lr``, ``messages[2].role``."""
    lines = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        kind = error["type"]
        if kind == "missing":
            message = "required key is missing"
        elif kind == "extra_forbidden":
            known = _fields_at(model, loc)
            close = difflib.get_close_matches(str(loc[-1]), known, n=1) if loc else []
            message = "unknown key" + (f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(known)})" if known else "")
        given = error.get("input")
        said = kind in ("missing", "extra_forbidden", "json_invalid") or message.startswith(str(given)) or (isinstance(given, str) and repr(given) in message)  # said already (json_invalid: its input is the whole document)
        shown = "" if said else f" (got {_shown(given)})"
        lines.append(f"{(where or _where)(loc) or '(top level)'}: {message}{shown}")
    return lines


def validation_message(exc: ValidationError, model: type[BaseModel] | None = None, limit: int = 5,
                       origin: Callable[[tuple[Any, ...]], str] | None = None,
                       where: Callable[[tuple[Any, ...]], str] | None = None) -> str:  # fmt: skip
    """Every problem pydantic found, on one line, each with its location and the input it got (at most ``limit``,
    then how many more): the one way a ``ValidationError`` is said to a user, anywhere in the project.
    ``origin(loc)`` prefixes a problem with where its value came from (``--set ``, ``--config FILE: ``)."""
    lines = error_lines(exc, model, where)
    if origin is not None:
        lines = [origin(tuple(e["loc"])) + line for e, line in zip(exc.errors(include_url=False), lines)]
    said = "; ".join(lines[:limit])
    return said + (f"; and {len(lines) - limit} more" if len(lines) > limit else "")


def one_line(exc: BaseException) -> str:
    """Any exception's message on one line; a pydantic error through the one renderer (every problem with its
    location and input), never its multi-line text or just "1 validation error for X"."""
    if isinstance(exc, ValidationError):
        return validation_message(exc)
    return " ".join(str(exc).split()) or type(exc).__name__
