"""Good envs are not refused (issue 33, precision): a decision carried in a free-text argument, keyword-graded
answers where a contraction costs a quarter (a warning with its figure), partial credit for the read that matters,
an idempotent write, and a long per-item task each pass the whole gate; each mechanism that lets them pass is shown
to be the one by switching it off where a check alone shows it. Real sandbox, real episodes."""

from __future__ import annotations

from typing import Any

import pytest

from factory.validation.checks import CheckContext
from factory.validation.checks import truth as truth_checks
from factory.validation.checks.outcomes import check_reward_sensitivity
from factory.validation.gate import Gate, validate_source
from factory.validation.lanes import Lanes, opener
from fuzz import free_text
from schemas.validation import CheckResult, ValidationConfig
from tests.gate.defects import GATE_ENVS
from tests.gate.test_defects import FAST
from tests.gate.test_exploit_search import BACKEND, SANDBOXED
from trace_env import gate_world
from trace_env.scenario_values import Masker
from trace_env.sdk import canonical_json

pytestmark = pytest.mark.skipif(not SANDBOXED, reason="no sandbox backend available")
#: Forty items, about half of them to cancel: dropping one of ~20 cancellations costs one item's share (1/40 of the
#: items' weight, ~0.023), less than half of one write's share (0.5/20 = 0.025).
FORTY = (("rng.randint(8, 12)", "rng.randint(38, 42)"), ("max_steps = 40", "max_steps = 100"),
         ('"insurance": rng.choice(["yes", "no"])', '"insurance": rng.choice(["yes", "no", "no", "no"])'))


def source(name: str, patches: tuple[tuple[str, str], ...] = ()) -> str:
    text = (GATE_ENVS / f"{name}.py").read_text()
    for old, new in patches:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def one_check(check: Any, text: str, **config: Any) -> CheckResult:
    settings = ValidationConfig(**{**FAST, "workers": 2, **config})
    open_env = opener(text, BACKEND, None, settings.load_timeout_s, settings.rpc_timeout_s)
    main = open_env()
    lanes = Lanes(open_env, main, settings.workers)
    try:
        return check(CheckContext(lanes, settings, settings.run_seed or 0))
    finally:
        lanes.close()
        main.close()


@pytest.mark.parametrize("name", ["claim_summary", "keyword_answer", "reads_credit", "idempotent_cancel"])
def test_valid_styles_pass_the_gate(name: str) -> None:
    report = validate_source(source(name), Gate(config=ValidationConfig(**FAST), backend=BACKEND))
    assert report.passed, [(c.name, c.figure, c.message) for c in report.failures()]
    checks = {c.name: c for c in report.checks}
    if name == "keyword_answer":  # "cannot" -> "can't" costs a quarter on refusal seeds: passed, with the figure
        paraphrase = checks["paraphrase"]
        assert "warning:" in paraphrase.figure and "-> 0.750" in paraphrase.figure, paraphrase.figure
        assert paraphrase.data["warning"]["largest"] == 0.25
    if name == "idempotent_cancel":  # the cancellation made twice ends in the same state: never judged a change
        assert checks["exploit_search"].data["per_exploit"]["duplicate_call"]["seeds"] == 0


def test_a_contraction_costing_a_quarter_failed_without_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(truth_checks, "SMALL_LOSS", 0.0)
    result = one_check(truth_checks.check_paraphrase, source("keyword_answer"))
    assert not result.passed and "contractions" in result.message


def test_free_text_mutants_change_the_decision_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """The summary's decision words are changed ("approve" -> "deny"): the reward falls on every seed. Changing any
    character instead (the old mutant: a courtesy word) leaves the reward, and the env is refused."""
    result = one_check(check_reward_sensitivity, source("claim_summary"))
    assert result.passed, result.message
    monkeypatch.setattr(free_text, "decision_mutant", lambda turns, texts: turns)
    assert not one_check(check_reward_sensitivity, source("claim_summary")).passed


def test_a_forty_item_task_is_judged_by_one_items_share() -> None:
    result = one_check(check_reward_sensitivity, source("long_task", FORTY), sensitivity_seeds=4)
    assert result.passed, result.message


def test_the_words_that_carry_a_decision() -> None:
    others = ["Claim C1: deny, over the limit. Thanks!", "Claim C2: approve, within the limit with a receipt. Thanks!"]
    mutant = free_text.swapped("Claim C9: approve, within the limit with a receipt. Thanks!", others)
    assert mutant is not None and mutant.startswith("Claim C9: deny, over the limit") and mutant.endswith("Thanks!")
    assert free_text.swapped("Transferred for Mia Li. Thanks!", ["Transferred for Noah Kim. Thanks!"]) is None  # names only


def test_what_comes_after_the_last_turn_is_not_heard() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "submit"}}]},
                {"role": "tool", "content": "approved: yes"}]
    assert gate_world.heard_text(messages) == "hi"


def test_diversity_counts_cases_not_phrasings() -> None:
    def case(rid: str, opening: str, cabin: str) -> dict[str, Any]:
        return {"state": {"reservations": {rid: {"reservation_id": rid, "cabin": cabin}}}, "user": {"opening": opening}}

    seen = {Masker(canonical_json(v)).fingerprint(v) for v in [
        case("AB12CD", "Hi, please cancel AB12CD.", "economy"), case("ZZ99YY", "Could you cancel ZZ99YY for me?", "economy"),
        case("QQ11RR", "Cancel QQ11RR now", "business")]}
    assert len(seen) == 2
