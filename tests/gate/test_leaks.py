"""Leaks found by prediction (``factory.validation.checks.leaks``): a user who states the verdict when asked the same
question twice, and a tool-result field written from the verdict, each predict the decision on every seed in words
no verdict list names; capability_necessity fails them with the feature and its accuracy. The same env without the
leak passes. Real sandbox, real episodes."""

from __future__ import annotations

import re

from typing import Any

import pytest

from factory.validation.checks import CheckContext, leaks
from factory.validation.checks.outcomes import check_necessity
from factory.validation.lanes import Lanes, opener
from schemas.validation import CheckResult, ValidationConfig
from tests.gate.defects import GATE_ENVS
from tests.gate.test_defects import FAST
from tests.gate.test_exploit_search import BACKEND, SANDBOXED

pytestmark = pytest.mark.skipif(not SANDBOXED, reason="no sandbox backend available")


def necessity(source: str, **config: Any) -> CheckResult:
    settings = ValidationConfig(**{**FAST, "workers": 2, **config})
    open_env = opener(source, BACKEND, None, settings.load_timeout_s, settings.rpc_timeout_s)
    main = open_env()
    lanes = Lanes(open_env, main, settings.workers)
    try:
        return check_necessity(CheckContext(lanes, settings, settings.run_seed or 0))
    finally:
        lanes.close()
        main.close()


@pytest.mark.parametrize(("name", "feature"), [("user_tells", "user reply: "), ("fare_family", "field .fare_family=")])
def test_a_leak_in_any_words_is_found_by_prediction(name: str, feature: str, monkeypatch: pytest.MonkeyPatch) -> None:
    result = necessity((GATE_ENVS / f"{name}.py").read_text())
    assert not result.passed
    # every seed necessity drew (more than its 40 when its interval asked for more) is predicted
    assert f"the feature '{feature}" in result.message and re.search(r"100% of (\d+) seeds where the skipping solution acts alike", result.message), result.message
    assert int(re.search(r"100% of (\d+) seeds", result.message).group(1)) >= 40
    assert result.counterexample is not None and result.counterexample.actions and feature in result.counterexample.detail
    monkeypatch.setattr(leaks, "LEAK_ACCURACY", 1.01)  # no rule is good enough: the old checks alone pass it
    assert necessity((GATE_ENVS / f"{name}.py").read_text()).passed


def test_the_env_without_the_leak_passes() -> None:
    result = necessity((GATE_ENVS / "refundable_question.py").read_text())
    assert result.passed, result.message


def test_the_best_single_feature_rule() -> None:
    labels = ["yes"] * 6 + ["no"] * 6
    features = [{"a", "noise"} for _ in range(6)] + [{"b"} if i % 2 else {"noise"} for i in range(6)]
    rule = leaks.best_rule(features, labels)
    assert rule is not None and rule[0] == "a" and rule[1] == 1.0
    features[0] = {"noise"}  # right on 11/12 (92%): below the line
    assert leaks.best_rule(features, labels) is None
    assert leaks.best_rule([{"a"}] * 12, labels) is None  # present everywhere: no rule
    assert leaks.fields({"r": {"ABC123X": {"fare": "flex", "n": 2}}}) == {"field .r.<id>.fare=flex", "field .r.<id>.n=2"}
