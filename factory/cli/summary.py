"""Summary tables that stay readable at 80 columns: a wide table when it fits, stacked records when not.

Rich squeezes a too-wide table by folding or cutting cells, and columns it cannot fit vanish; a summary that
loses its gym id at 80 columns is worse than none. :func:`summary_table` measures the table first: if it fits
with cells wrapped at word boundaries it is printed so, else every record is printed as a small key/value
block: every column stays, nothing is cut mid-word.
Cell values are plain text (never markup), so names and messages from outside print as themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from factory.cli.common import plain

Styles = Mapping[str, Callable[[str], str]]
"""Column -> function of the cell's value giving a Rich style ("bold", "red")."""


def _cell(column: str, value: str, styles: Styles | None) -> Text:
    style = styles[column](value) if styles and column in styles else ""
    return plain(value, style)


def key_value_table(title: str, cells: Mapping[str, str], styles: Styles | None = None) -> Table:
    """One record as rows of key and value; long values wrap instead of being cut."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(no_wrap=True, style="bold")
    table.add_column(overflow="fold")
    for key, value in cells.items():
        table.add_row(key, _cell(key, value, styles))
    return table


def wide_table(
    title: str, columns: Sequence[str], rows: Sequence[Mapping[str, str]], styles: Styles | None = None, key: str | None = None,
) -> Table:
    """One row per record; cells may wrap at word boundaries, except the ``key`` column, which never breaks."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, no_wrap=column == key, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(c, row.get(c, ""), styles) for c in columns))
    return table


def fits(table: Table, width: int, wrapped: bool = False) -> bool:
    """Whether ``table`` prints at ``width`` columns with no cell cut: unwrapped, or (``wrapped``) with cells
    wrapped at word boundaries at most."""
    console = Console(width=width)
    unbounded = console.options.update(width=1 << 16, max_width=1 << 16)
    measured = Measurement.get(console, unbounded, table)
    return (measured.minimum if wrapped else measured.maximum) <= width


def stacked_table(title: str, columns: Sequence[str], rows: Sequence[Mapping[str, str]], styles: Styles | None = None) -> Table:
    """Every record as a block of key/value rows, records separated by a rule: narrow, and no column dropped."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(no_wrap=True, style="bold")
    table.add_column(overflow="fold")
    for index, row in enumerate(rows):
        if index:
            table.add_section()
        for column in columns:
            table.add_row(column, _cell(column, row.get(column, ""), styles))
    return table


def summary_table(
    title: str, columns: Sequence[str], rows: Sequence[Mapping[str, str]], width: int, styles: Styles | None = None, key: str | None = None,
) -> Table:
    """A table with one row per record at ``width`` if it fits (cells wrapped at words if need be), else
    :func:`stacked_table` with ``key`` first."""
    table = wide_table(title, columns, rows, styles, key)
    if fits(table, width, wrapped=True):
        return table
    ordered = [key, *(c for c in columns if c != key)] if key in columns else list(columns)
    return stacked_table(title, ordered, rows, styles)
