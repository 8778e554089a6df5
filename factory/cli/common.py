"""What every ``factory`` command shares: consoles, one error convention, common options.

One convention: a command that cannot go on calls :func:`fail` (one line on stderr, no traceback, exit 2
for bad input, 1 for a failed run). Text that came from outside (files, env code, LLMs) goes through
:func:`safe` before Rich sees it, so it can neither inject markup nor control sequences.
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from sandbox import BACKENDS
from schemas.config_file import load_settings
from schemas.errors import FactoryError, InputError, one_line
from schemas.files import explain
from schemas.validation import ValidationConfig

console = Console()
errors = Console(stderr=True)

_UNSAFE_CLASS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 controls but tab and newline, DEL, C1 controls (U+009B is a one-byte CSI)
    "\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"  # bidi marks, overrides, isolates; invisibles
    "\U000e0000-\U000e007f"  # tag characters: invisible text
)
_UNSAFE = re.compile(f"[{_UNSAFE_CLASS}]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def escape_controls(text: object) -> str:
    """Every control, bidi and invisible formatting character as a visible escape (``\\x9b``, ``\\u202e``); tab
    and newline kept. What a terminal shows is then what the text holds: no escape sequence runs, no
    override reverses a line, nothing hides."""
    return _UNSAFE.sub(_visible, str(text))


def safe(text: object) -> str:
    """Text from outside, fit for Rich: control and bidi characters shown as escapes and markup escaped, so
    ``[/]`` or ``\\x1b]52;...`` print as themselves and never act."""
    return escape(escape_controls(text))


def plain(text: object, style: str = "") -> Text:
    """Text from outside as a Rich ``Text`` (never parsed as markup), control characters escaped: for table cells."""
    return Text(escape_controls(text), style=style)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(text: str) -> str:
    """A JSON document with every control, bidi and invisible character written as a ``\\uXXXX`` escape.

    JSON escapes only U+0000-U+001F itself, so U+009B (CSI) or U+202E (right-to-left override) from env code
    would reach a terminal raw. These characters can stand only inside JSON strings (the syntax is ASCII), where
    an escape means the same character: ``json.loads`` gives back exactly the original data. (Tab and newline
    outside strings are the layout of ``indent=2``; inside strings JSON has escaped them already.)"""
    return _UNSAFE.sub(_json_escape, text)


def emit_json(data: object) -> None:
    """Print ``--json`` output: a pydantic model, a JSON string, or plain data, escaped by :func:`json_text`."""
    import json as _json

    if isinstance(data, BaseModel):
        text = data.model_dump_json(indent=2)
    elif isinstance(data, str):
        text = data
    else:
        text = _json.dumps(data, indent=2, default=str, ensure_ascii=False)
    sys.stdout.write(json_text(text) + "\n")
    sys.stdout.flush()


def sigterm_as_interrupt() -> AbstractContextManager[None]:
    """SIGTERM (a batch system's stop) ends a long command like Ctrl-C, so its ``KeyboardInterrupt`` path keeps
    what is finished and says how to resume; the exit code says which signal it was (130 or 143)."""
    from factory.cli.exits import signals_as_interrupt

    return signals_as_interrupt()


def interrupted(tail: str, exc: BaseException) -> NoReturn:
    """One line for a command stopped by a signal, with the contract's code: ``error: interrupted{tail}`` and 130
    for Ctrl-C, ``error: stopped by SIGTERM{tail}`` and 143 for SIGTERM. ``tail`` says what is kept and how to go on."""
    from factory.cli.exits import mark_reported, stop_code

    mark_reported()
    code = stop_code(exc)
    what = "stopped by SIGTERM" if code == 143 else "interrupted" if code == 130 else f"stopped by signal {code - 128}"
    errors.print(f"[bold red]error:[/] {what}{safe(tail)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


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
    """What ``main`` does with anything a command let escape: one line and the contract's exit code, never a
    traceback (unless $TRACE_FACTORY_DEBUG=1, for bug reports). Bad input the command did not catch still
    exits 2 (:func:`factory.cli.exits.exit_code` knows the input error types); OS errors name the path and
    the fix; only an exception nobody raised on purpose is called a bug."""
    import os

    from factory.cli.exits import exit_code

    if isinstance(exc, SystemExit):
        raise exc
    if type(exc).__name__ == "Abort" and isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
        exc = exc.__cause__ or exc.__context__  # click turns a KeyboardInterrupt into Abort; which signal was it?
    if type(exc).__name__ == "Abort" or isinstance(exc, KeyboardInterrupt):
        code = exit_code(exc) if isinstance(exc, KeyboardInterrupt) else 130
        errors.print(f"[bold red]error:[/] {'stopped by SIGTERM' if code == 143 else 'interrupted'}", highlight=False)
        return code
    if os.environ.get(DEBUG_ENV_VAR) == "1":
        raise exc
    if isinstance(exc, OSError):
        errors.print(f"[bold red]error:[/] {safe(explain(exc))}", highlight=False, soft_wrap=True)
        return 1
    code = exit_code(exc)
    if isinstance(exc, FactoryError) or code == 2:
        errors.print(f"[bold red]error:[/] {safe(one_line(exc))}", highlight=False, soft_wrap=True)
        return code
    errors.print(
        f"[bold red]error:[/] internal error: {safe(type(exc).__name__)}: {safe(one_line(exc)[:600])} "
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


def gate_config(overrides: list[str] | None) -> ValidationConfig:
    """The gate's thresholds with ``--set KEY=VALUE`` overrides (the one ``--set`` parser), or a one-line exit 2."""
    try:
        return load_settings(ValidationConfig, None, overrides or [])
    except InputError as exc:
        fail(str(exc))


def check_backend(name: str) -> None:
    if name != "auto" and name not in BACKENDS:
        fail(f"--sandbox {name!r} is not a backend; choose one of: auto, {', '.join(BACKENDS)}")


def print_sandbox(backend: str, warning: str | None) -> None:
    errors.print(f"sandbox: [bold]{safe(backend)}[/]", highlight=False)
    if warning:
        errors.print(f"[bold red]WARNING:[/] {safe(warning)}", highlight=False)


def parse_env_ref(reference: str, version: int | None) -> tuple[str, int | None]:
    """Accept ``name``, ``trace/name-vN`` and ``env_registry:trace/name-vN``; a name no env can have
    (``../../x``) is refused here, with the command that lists the names there are."""
    from schemas.names import capability_problem

    name = reference.split(":", 1)[-1].removeprefix("trace/")
    if "-v" in name:
        base, _, number = name.rpartition("-v")
        if number.isdigit():
            name, version = base, version if version is not None else int(number)
    if problem := capability_problem(name):
        fail(f"{problem}; `factory envs list` shows the registered envs (NAME or trace/NAME-vN)")
    return name, version


def use_registry(registry: Path | None) -> None:
    """Make ``--registry`` the root every env id of this command resolves to: ``$TRACE_FACTORY_REGISTRY`` for
    the processes it starts, and the ids Gymnasium already knows re-pointed in this one (an id registered
    earlier in the process, from another root, would otherwise keep resolving there)."""
    if registry is None:
        return
    from env_registry.registration import register_all

    os.environ["TRACE_FACTORY_REGISTRY"] = str(registry)
    register_all(registry, repoint=True)
