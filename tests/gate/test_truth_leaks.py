"""What only the reference reads may not state the decision either: a verdict written into a name or an id
(masked everywhere else in the leak check, since names and ids differ per seed) is found when the same name
recurs across seeds exactly with one decision; names drawn from a small pool independently of the truth pass.
Diffs on the example env, played by the real gate in a real sandbox."""

from __future__ import annotations

import pytest

from factory.validation.gate import Gate, validate_source
from sandbox import available_backends
from schemas.validation import ValidationConfig
from tests.gate.defects import EXAMPLE
from tests.gate.test_defects import FAST

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
ANCHOR = '        scenario.meta["variant"] = scenario.truth["rule"]\n'
PASSENGER = 'scenario.state["reservations"][rid]["passengers"][0]["first_name"]'


def _variant(line: str) -> str:
    source = EXAMPLE.read_text()
    assert source.count(ANCHOR) == 1
    return source.replace(ANCHOR, ANCHOR + "        " + line + "\n")


def _gate() -> Gate:
    return Gate(config=ValidationConfig(**FAST), backend=SANDBOXED[0])


def test_a_verdict_hidden_in_a_name_the_reference_reads_is_a_leak() -> None:
    source = _variant(f'{PASSENGER} = "Aurelio" if scenario.truth["eligible"] else "Bertrand"')
    report = validate_source(source, _gate())
    failed = {c.name: c for c in report.failures()}
    assert set(failed) == {"capability_necessity"}, {n: c.message for n, c in failed.items()}
    message = failed["capability_necessity"].message
    assert "name or id" in message and ("'Aurelio'" in message or "'Bertrand'" in message), message
    assert failed["capability_necessity"].counterexample is not None


def test_names_from_a_small_pool_independent_of_the_truth_pass() -> None:
    source = _variant(f'{PASSENGER} = self.rng(seed + 1).choice(["Aurelio", "Bertrand"])')
    report = validate_source(source, _gate())
    assert report.passed, [(c.name, c.message) for c in report.failures()]
