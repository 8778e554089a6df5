"""The ``factory`` command line: one subcommand per pipeline step, each in its own module here.

Every command follows :mod:`factory.cli.common`'s convention: bad input and faults end in one line on
stderr and a non-zero exit, never a traceback; ``--json`` prints machine-readable output only. Every command
keeps one exit-code contract (:mod:`factory.cli.exits`), printed at the foot of every ``--help``.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from factory.cli import analyze, build, envs, rollout, route, run, sandbox, train, validate
from factory.cli import eval as evaluate
from factory.cli import serve
from factory.cli.common import errors, last_resort, safe, usage_message
from factory.cli.exits import CONTRACT, after_stop, install_signal_handlers
from sandbox.leftovers import reap_once

app = typer.Typer(
    name="factory",
    help="trace-factory: turn an agent's recurring failures into validated, capability-targeted training envs.",
    epilog=CONTRACT,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def version() -> str:
    """The installed distribution's version, or the source tree's when run from a checkout that is not installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("trace-factory")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])
        except (OSError, KeyError, ValueError):
            return "unknown"


def _print_version(value: bool) -> None:
    if value:
        print(f"factory (trace-factory) {version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    show_version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """trace-factory: turn an agent's recurring failures into validated, capability-targeted training envs."""


def flowed(doc: str | None) -> str | None:
    """A docstring as ``--help`` shows it: each paragraph one line, for the terminal to wrap at its width, so no
    line breaks mid-sentence where the source was wrapped. Paragraphs with indented or ``-`` lines (layouts,
    lists) keep their lines."""
    if not doc:
        return doc
    import inspect

    paragraphs = inspect.cleandoc(doc).split("\n\n")
    kept = [p if any(line.startswith((" ", "- ", "* ", "|")) for line in p.splitlines()[1:]) else " ".join(p.split()) for p in paragraphs]
    return "\n\n".join(kept)


def _command(name: str, function: object) -> None:
    app.command(name, epilog=CONTRACT, help=flowed(getattr(function, "__doc__", None)))(function)  # type: ignore[arg-type]


# In pipeline order, which is the order `factory --help` lists them in; every --help ends with the exit codes.
_command("rollout", rollout.rollout)
_command("analyze", analyze.analyze_command)
_command("build", build.build)
_command("validate", validate.validate)
app.add_typer(envs.app, name="envs", epilog=CONTRACT)
_command("train", train.train)
_command("route", route.route)
_command("eval", evaluate.eval_command)
_command("run", run.run_command)
app.add_typer(sandbox.app, name="sandbox", epilog=CONTRACT)
app.command("serve", epilog=CONTRACT)(serve.serve_command)
for _group in (envs.app, sandbox.app):
    for _info in _group.registered_commands:
        _info.epilog = _info.epilog or CONTRACT
        _info.help = _info.help or flowed(getattr(_info.callback, "__doc__", None))


def _usage_error_types() -> tuple[type[Exception], ...]:
    """Click's usage errors: typer >= 0.26 vendors click as ``typer._click``; older typer uses click itself."""
    found: list[type[Exception]] = []
    try:
        from typer._click.exceptions import UsageError as VendoredUsageError

        found.append(VendoredUsageError)
    except ImportError:
        pass
    try:
        import click

        found.append(click.UsageError)
    except ImportError:
        pass
    return tuple(found)


def main() -> None:
    """Entry point. Usage errors (unknown flags, missing values) get one line, like every other bad input."""
    install_signal_handlers()  # SIGTERM ends a command like Ctrl-C (keep what finished), and exits 143
    try:
        reap_once()  # sandboxes of processes that were killed (kill -9) before they could close them
        code = app(standalone_mode=False)
    except _usage_error_types() as exc:
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help())
            sys.exit(2)
        command = ctx.command_path if ctx is not None else "factory"
        errors.print(f"[bold red]error:[/] {safe(usage_message(exc))} (see `{command} --help`)", highlight=False, soft_wrap=True)  # type: ignore[attr-defined]
        sys.exit(2)
    except BaseException as exc:  # noqa: BLE001 - the last boundary: whatever escaped a command, one line
        sys.exit(last_resort(exc))
    code, line = after_stop(code if isinstance(code, int) else 0)  # typer turns a stop into a silent 130
    if line:
        errors.print(f"[bold red]error:[/] {line}", highlight=False)
    sys.exit(code)


if __name__ == "__main__":
    main()
