"""What `factory validate` exits with for each gate status: CI chooses what an inconclusive verdict means."""

from __future__ import annotations

from factory.cli.validate import STARVED_EXIT, verdict_exit
from schemas.validation import ValidationConfig, ValidationReport


def report(status: str, starved: str | None = None) -> ValidationReport:
    return ValidationReport(source_sha256="0" * 64, backend="bwrap", passed=status == "passed", status=status,  # type: ignore[arg-type]
                            checks=[], config=ValidationConfig(), seconds=1.0, starved=starved)


def test_exit_codes_per_status_and_choice() -> None:
    assert verdict_exit([report("passed")]) == 0
    assert verdict_exit([report("passed"), report("failed")]) == 1
    assert [verdict_exit([report("inconclusive")], choice) for choice in ("fail", "pass", "error")] == [1, 0, 3]
    assert verdict_exit([report("failed"), report("inconclusive")], "pass") == 1  # a failure outranks the choice
    line = "machine starved: the env's worker got no CPU"
    assert verdict_exit([report("starved", line), report("inconclusive")], "pass") == STARVED_EXIT == 75
    assert verdict_exit([report("starved", line), report("failed")]) == 1
