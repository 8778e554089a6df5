"""The ``factory`` command line: one subcommand per pipeline step, each in its own module here.

Every command follows :mod:`factory.cli.common`'s convention: bad input and faults end in one line on
stderr and a non-zero exit, never a traceback; ``--json`` prints machine-readable output only.
"""

from __future__ import annotations

import sys

import typer

from factory.cli import analyze, build, envs, rollout, route, run, sandbox, train, validate
from factory.cli import eval as evaluate
from factory.cli.common import errors, last_resort, safe, usage_message
from sandbox.leftovers import reap_once

app = typer.Typer(
    name="factory",
    help="trace-factory: turn an agent's recurring failures into validated, capability-targeted training envs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# In pipeline order, which is the order `factory --help` lists them in.
app.command("rollout")(rollout.rollout)
app.command("analyze")(analyze.analyze_command)
app.command("build")(build.build)
app.command("validate")(validate.validate)
app.add_typer(envs.app, name="envs")
app.command("train")(train.train)
app.command("route")(route.route)
app.command("eval")(evaluate.eval_command)
app.command("run")(run.run_command)
app.add_typer(sandbox.app, name="sandbox")


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
    reap_once()  # sandboxes of processes that were killed (kill -9) before they could close them
    try:
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
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
