"""The truth follows from what the agent can see. Diffs on the example env, played by the real gate in a real
sandbox:

- what only the reference reads may not state the decision: a verdict written into a name or an id (masked
  everywhere else in the leak check, since names and ids differ per seed) is found when the same name recurs
  across seeds exactly with one decision; names from a small pool drawn independently of the truth pass;
- generate may not change the records after it sets the truth (the truth would be computed from records the
  agent never sees), whether or not the env declares ``derive_truth``; changes made before it pass;
- where ``derive_truth`` is declared, a numeric rule the agent is never told (small refunds refused) is found
  by moving the numbers the agent reads; the same rule stated in the system prompt passes.
"""

from __future__ import annotations

import pytest

from factory.validation.gate import Gate, validate_source
from sandbox import available_backends
from schemas.validation import ValidationConfig
from tests.gate.defects import EXAMPLE
from tests.gate.test_defects import FAST

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
SET_TRUTH = "        scenario.truth = self.derive_truth(scenario, scenario.state)\n"
RESERVATION = 'scenario.state["reservations"][rid]'


def _variant(before: str = "", after: str = "", derive: bool = True) -> str:
    """The example with lines run before and after generate sets the truth (and, without ``derive``, its
    ``derive_truth`` renamed, so the gate cannot recompute the truth)."""
    source = EXAMPLE.read_text()
    assert source.count(SET_TRUTH) == 1
    source = source.replace(SET_TRUTH, "".join(f"        {line}\n" for line in before.splitlines()) + SET_TRUTH
                            + "".join(f"        {line}\n" for line in after.splitlines()))
    return source if derive else source.replace("derive_truth", "truth_from")


def _failures(source: str) -> dict[str, str]:
    report = validate_source(source, Gate(config=ValidationConfig(**FAST), backend=SANDBOXED[0]))
    return {c.name: c.message for c in report.failures()}


def test_a_verdict_hidden_in_a_name_the_reference_reads_is_a_leak() -> None:
    code_word = (f'{RESERVATION}["passengers"][0]["first_name"] = '
                 '"Aurelio" if self.derive_truth(scenario, scenario.state)["eligible"] else "Bertrand"')
    failed = _failures(_variant(before=code_word))
    assert set(failed) == {"capability_necessity"}, failed
    message = failed["capability_necessity"]
    assert "name or id" in message and ("'Aurelio'" in message or "'Bertrand'" in message), message


def test_names_from_a_small_pool_independent_of_the_truth_pass() -> None:
    assert _failures(_variant(before=f'{RESERVATION}["passengers"][0]["first_name"] = rng.choice(["Aurelio", "Bertrand"])')) == {}


def test_records_changed_after_the_truth_is_set_are_stale_without_derive_truth() -> None:
    flip = f'{RESERVATION}["cabin"] = "economy" if {RESERVATION}["cabin"] == "business" else "business"'
    failed = _failures(_variant(after=flip, derive=False))
    assert set(failed) == {"stale_truth"}, failed
    assert "after it set the truth" in failed["stale_truth"] and ".cabin" in failed["stale_truth"], failed


def test_records_changed_before_the_truth_is_set_pass_without_derive_truth() -> None:
    flip = f'{RESERVATION}["cabin"] = "economy" if {RESERVATION}["cabin"] == "business" else "business"'
    assert _failures(_variant(before=flip, derive=False)) == {}


SMALL_REFUNDS = (
    '        check = airline.cancellation_check(reservation, state["flights"], now, scenario.user["reason"])\n',
    '        check = airline.cancellation_check(reservation, state["flights"], now, scenario.user["reason"])\n'
    '        if check.eligible and airline.paid_total(reservation) < 250:\n'
    '            return {"now": scenario.truth["now"], "eligible": False, "rule": "no_rule", "refund": airline.paid_total(reservation)}\n',
)
NOTE = '"- When you refuse, tell the user which rule stands in the way."'


def _small_refunds(stated: bool) -> str:
    source = EXAMPLE.read_text()
    assert source.count(SMALL_REFUNDS[0]) == 1 and source.count(NOTE) == 1
    source = source.replace(*SMALL_REFUNDS)
    return source.replace(NOTE, NOTE[:-1] + '\\n- Refunds under $250 are not processed: refuse those cancellations."') if stated else source


def test_a_numeric_rule_the_agent_is_never_told_is_found() -> None:
    failed = _failures(_small_refunds(stated=False))
    assert set(failed) == {"stale_truth"}, failed
    assert "never told" in failed["stale_truth"] and "payment_history" in failed["stale_truth"], failed


def test_the_same_rule_stated_in_the_system_prompt_passes() -> None:
    assert _failures(_small_refunds(stated=True)) == {}
