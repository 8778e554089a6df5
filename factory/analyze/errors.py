"""Errors for bad analysis input: they name the file, record and field, so the CLI can print one line."""

from __future__ import annotations

from schemas.errors import FactoryError

from pathlib import Path


class AnalyzeInputError(FactoryError, ValueError):
    """Bad input to ``factory analyze``: a missing or corrupt file, a bad record, an unknown flag value."""


class TrajectoryFormatError(AnalyzeInputError):
    """A trajectory file that cannot be imported; ``str()`` reads ``file: record: field: problem``."""

    def __init__(self, path: Path | str, problem: str, record: str | None = None, field: str | None = None) -> None:
        self.path, self.record, self.field, self.problem = str(path), record, field, problem
        parts = [self.path]
        if record:
            parts.append(record)
        if field:
            parts.append(f"field {field}")
        parts.append(problem)
        super().__init__(": ".join(parts))
