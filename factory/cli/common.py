"""What every ``factory`` command shares: consoles, one error convention, common options.

One convention: a command that cannot go on calls :func:`fail` (one line on stderr, no traceback, exit 2
for bad input, 1 for a failed run). Text that came from outside (files, env code, LLMs) goes through
:func:`safe` before Rich sees it, so it can neither inject markup nor control sequences.
"""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from sandbox import BACKENDS
from schemas.validation import ValidationConfig

console = Console()
errors = Console(stderr=True)

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def safe(text: object) -> str:
    """Text from outside, fit for Rich: control characters (escape sequences, bidi overrides) removed and
    markup escaped, so ``[/]`` or ``\\x1b]52;...`` print as themselves or not at all."""
    return escape(_CONTROL.sub("", str(text)))


def plain(text: object, style: str = "") -> Text:
    """Text from outside as a Rich ``Text`` (never parsed as markup), control characters removed: for table cells."""
    return Text(_CONTROL.sub("", str(text)), style=style)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a batch system's stop) ends a long command like Ctrl-C, so its ``KeyboardInterrupt`` path keeps
    what is finished and says how to resume. Handlers can only be set from the main thread; elsewhere a no-op."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt) if threading.current_thread() is threading.main_thread() else None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr, no traceback: bad input is the user's to fix, so say how. Exit 2 for bad input,
    1 for a run that could not finish (a full disk, an unwritable path found late)."""
    errors.print(f"[bold red]error:[/] {safe(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


DEBUG_ENV_VAR = "TRACE_FACTORY_DEBUG"


def usage_message(exc: Exception) -> str:
    """Click's message for a bad flag, plus the option's allowed range when it has one (``--max-attempts 0``)."""
    text = exc.format_message()  # type: ignore[attr-defined]
    param = getattr(exc, "param", None)
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is not None or high is not None:
        text += " (allowed: " + (f"{low} <= " if low is not None else "") + "value" + (f" <= {high}" if high is not None else "") + ")"
    return text


def last_resort(exc: BaseException) -> int:
    """What ``main`` does with anything a command let escape: one line and an exit code, never a traceback
    (unless $TRACE_FACTORY_DEBUG=1, for bug reports). OS errors name the path and the fix."""
    import os

    if isinstance(exc, SystemExit):
        raise exc
    if type(exc).__name__ == "Abort" or isinstance(exc, KeyboardInterrupt):
        errors.print("interrupted", highlight=False)
        return 130
    if os.environ.get(DEBUG_ENV_VAR) == "1":
        raise exc
    if isinstance(exc, OSError):
        from env_registry.files import explain

        errors.print(f"[bold red]error:[/] {safe(explain(exc))}", highlight=False, soft_wrap=True)
        return 1
    errors.print(
        f"[bold red]error:[/] internal error: {safe(type(exc).__name__)}: {safe(str(exc).splitlines()[0] if str(exc) else '')} "
        f"(a bug: rerun with {DEBUG_ENV_VAR}=1 for the traceback and report it)",
        highlight=False, soft_wrap=True,
    )
    return 1


RegistryOption = Annotated[
    Optional[Path],
    typer.Option("--registry", help="Registry root (default: $TRACE_FACTORY_REGISTRY or ~/.cache/trace-factory/envs)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON only.")]


SandboxOption = Annotated[
    str,
    typer.Option(
        "--sandbox",
        help="Where env code runs: auto (docker if a daemon answers, else bwrap), "
        + ", ".join(BACKENDS) + " (unsafe-subprocess: NO isolation; explicit opt-in).",
    ),
]
SetOption = Annotated[
    Optional[list[str]],
    typer.Option("--set", help="Override a gate threshold, e.g. --set solvability_seeds=50 (repeatable)."),
]


def allowed_range(model: type[BaseModel], field: str) -> str | None:
    """A field's bounds in words (``0 <= value <= 1``), read from its pydantic constraints; None when unbounded."""
    info = model.model_fields[field]
    low = high = None
    for item in info.metadata:
        for attribute, side, symbol in (("ge", "low", "<="), ("gt", "low", "<"), ("le", "high", "<="), ("lt", "high", "<")):
            bound = getattr(item, attribute, None)
            if bound is not None:
                if side == "low":
                    low = f"{bound} {symbol} "
                else:
                    high = f" {symbol} {bound}"
    if low is None and high is None:
        return None
    kind = getattr(info.annotation, "__name__", "value")
    return f"{low or ''}{kind if kind in ('int', 'float') else 'value'}{high or ''}"


def gate_config(overrides: list[str] | None) -> ValidationConfig:
    values: dict[str, str] = {}
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep or key not in ValidationConfig.model_fields:
            known = ", ".join(ValidationConfig.model_fields)
            fail(f"--set {item!r}: expected KEY=VALUE with KEY one of: {known}")
        values[key] = value
    try:
        return ValidationConfig.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else "?"
        message = str(first["msg"]).removeprefix("Value error, ")
        bounds = allowed_range(ValidationConfig, key) if key in ValidationConfig.model_fields else None
        if bounds and "allowed" not in message:  # the model's own message may already state the range
            message += f" (allowed: {bounds})"
        fail(f"--set {key}={values.get(key, '')}: {message}")
        raise


def check_backend(name: str) -> None:
    if name != "auto" and name not in BACKENDS:
        fail(f"--sandbox {name!r} is not a backend; choose one of: auto, {', '.join(BACKENDS)}")


def print_sandbox(backend: str, warning: str | None) -> None:
    errors.print(f"sandbox: [bold]{safe(backend)}[/]", highlight=False)
    if warning:
        errors.print(f"[bold red]WARNING:[/] {safe(warning)}", highlight=False)


def parse_env_ref(reference: str, version: int | None) -> tuple[str, int | None]:
    """Accept ``name``, ``trace/name-vN`` and ``env_registry:trace/name-vN``."""
    name = reference.split(":", 1)[-1].removeprefix("trace/")
    if "-v" in name:
        base, _, number = name.rpartition("-v")
        if number.isdigit():
            return base, version if version is not None else int(number)
    return name, version
