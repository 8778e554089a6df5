"""Live display of the validation gate and its result table (rich), shared by `validate` and `build`. Host side.

Figures, messages and counterexamples carry text that env code produced (exception messages, reward details,
tool output). Every such string goes through :func:`factory.cli.common.safe` before Rich sees it: control
characters (escape sequences such as a forged green "all checks passed", OSC 8 hyperlinks, OSC 52 clipboard
writes, bidi overrides) are dropped and Rich markup (``[/]``, ``[link=...]``) is escaped, so it prints as
itself and can neither style the screen nor crash the renderer.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from factory.cli.common import safe
from factory.validation.gate import CHECK_NAMES, ProgressCallback
from schemas.validation import CheckResult, ValidationReport

#: Printed under every gate table: what the static check is, and what actually protects the host.
BOUNDARY_NOTE = "The static check is a first filter; the sandbox ({backend}) is the security boundary."
_MAX_NOTE_CHARS = 600


class GateProgress:
    """A progress bar over the gate's checks; use as a context manager and pass ``callback`` to the gate."""

    def __init__(self, console: Console, label: str, enabled: bool = True, extra_checks: int = 0) -> None:
        self.progress = Progress(
            SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(), console=console, transient=True, disable=not enabled,
        )
        self.label = safe(label)
        self.task = self.progress.add_task(self.label, total=len(CHECK_NAMES) + extra_checks)

    def __enter__(self) -> "GateProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    @property
    def callback(self) -> ProgressCallback:
        def update(name: str, result: CheckResult | None) -> None:
            if result is None:
                self.progress.update(self.task, description=f"{self.label}: {safe(name)}")
            else:
                self.progress.advance(self.task)

        return update


def _note(check: CheckResult) -> str:
    """One failure note: the check's message and counterexample, all of it escaped."""
    if check.inconclusive:
        return f"[yellow]{safe(check.name)}[/]: {safe(check.message[:_MAX_NOTE_CHARS])}"
    text = check.message
    ce = check.counterexample
    if ce is not None:
        detail = f"; {ce.detail[:120]}" if ce.detail else ""
        text += f" (counterexample: seed {ce.seed}, {len(ce.actions)} actions{detail})"
    if len(text) > _MAX_NOTE_CHARS:
        text = text[:_MAX_NOTE_CHARS] + "..."
    return f"[red]{safe(check.name)}[/]: {safe(text)}"


def report_table(report: ValidationReport, title: str) -> Table:
    """One row per check; the reasons and counterexamples of failures follow as a caption, then the note
    that the sandbox, not the static check, is the security boundary."""
    table = Table(title=safe(title), title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("figure", overflow="fold", ratio=1)
    table.add_column("time", no_wrap=True, justify="right")
    notes = []
    for check in report.checks:
        if check.skipped:
            verdict = "[dim]skipped[/]"
        elif check.inconclusive:
            verdict = "[yellow]inconclusive[/]"
        else:
            verdict = "[green]pass[/]" if check.passed else ("[red]FAIL[/]" if check.required else "[yellow]fail[/]")
        table.add_row(safe(check.name), verdict, safe(check.figure), f"{check.seconds:.2f}s")
        if not check.passed and not check.skipped:
            notes.append(_note(check))
    if report.starved:
        notes.append(f"[yellow]starved[/]: {safe(report.starved)}")
    if report.run_seed is not None:
        notes.append(f"[dim]seeds drawn with run_seed={report.run_seed} on {report.workers} worker(s); repeat this run with "
                     f"--set run_seed={report.run_seed}[/]")
    if report.off_target:
        notes.append("[dim]off-target: the env trains on a tool domain of its own, not its target's tools[/]")
    notes.append(f"[dim]{safe(BOUNDARY_NOTE.format(backend=report.backend))}[/]")
    table.caption = "\n".join(notes)
    table.caption_justify = "left"
    return table
