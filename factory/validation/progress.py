"""Live display of the validation gate and its result table (rich), shared by `validate` and `build`."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from factory.validation.gate import CHECK_NAMES, ProgressCallback
from schemas.validation import CheckResult, ValidationReport


class GateProgress:
    """A progress bar over the gate's checks; use as a context manager and pass ``callback`` to the gate."""

    def __init__(self, console: Console, label: str, enabled: bool = True, extra_checks: int = 0) -> None:
        self.progress = Progress(
            SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(), console=console, transient=True, disable=not enabled,
        )
        self.task = self.progress.add_task(label, total=len(CHECK_NAMES) + extra_checks)
        self.label = label

    def __enter__(self) -> "GateProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    @property
    def callback(self) -> ProgressCallback:
        def update(name: str, result: CheckResult | None) -> None:
            if result is None:
                self.progress.update(self.task, description=f"{self.label}: {name}")
            else:
                self.progress.advance(self.task)

        return update


def report_table(report: ValidationReport, title: str) -> Table:
    """One row per check; the reasons and counterexamples of failures follow as a caption."""
    table = Table(title=title, title_justify="left")
    table.add_column("check", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("figure", overflow="fold", ratio=1)
    table.add_column("time", no_wrap=True, justify="right")
    notes = []
    for check in report.checks:
        if check.skipped:
            verdict = "[dim]skipped[/]"
        else:
            verdict = "[green]pass[/]" if check.passed else ("[red]FAIL[/]" if check.required else "[yellow]fail[/]")
        table.add_row(check.name, verdict, check.figure, f"{check.seconds:.2f}s")
        if not check.passed and not check.skipped:
            note = f"[red]{check.name}[/]: {check.message}"
            ce = check.counterexample
            if ce is not None:
                note += f" (counterexample: seed {ce.seed}, {len(ce.actions)} actions{'; ' + ce.detail[:120] if ce.detail else ''})"
            notes.append(note)
    if notes:
        table.caption = "\n".join(notes)
        table.caption_justify = "left"
    return table
