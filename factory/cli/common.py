"""What every ``factory`` command shares: consoles, one error convention, common options.

One convention: a command that cannot go on calls :func:`fail` (one line on stderr, no traceback, exit 2
for bad input, 1 for a failed run). Text that came from outside (files, env code, LLMs) goes through
:func:`safe` before Rich sees it, so it can neither inject markup nor control sequences.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from sandbox import BACKENDS
from schemas.validation import ValidationConfig

console = Console()
errors = Console(stderr=True)

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def safe(text: object) -> str:
    """Text from outside, fit for Rich: control characters (escape sequences, bidi overrides) removed and
    markup escaped, so ``[/]`` or ``\\x1b]52;...`` print as themselves or not at all."""
    return escape(_CONTROL.sub("", str(text)))


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr, no traceback: bad input is the user's to fix, so say how."""
    errors.print(f"[bold red]error:[/] {safe(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


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
        fail(f"--set {first['loc'][0]}: {first['msg']}")
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
