"""The exploit search that optimizes (``factory.validation.checks.search``): on envs whose hole no named exploit of
``fuzz/exploits.py`` plays, the library alone passes them and the search finds the hole, reported as a replayable
counterexample; valid envs pass it; it is deterministic given the run seed. Real sandbox, real episodes."""

from __future__ import annotations

from typing import Any

import pytest

from factory.validation.checks import search as searching
from fuzz import search as primitives
from fuzz.exploits import ExploitInput
from schemas.validation import CheckResult
from tests.gate.defects import GATE_ENVS
from tests.gate.test_exploit_search import SANDBOXED, exploit_search

pytestmark = pytest.mark.skipif(not SANDBOXED, reason="no sandbox backend available")



def _widened(actions: list[Any]) -> bool:
    """A submit whose list holds more ids than one refund is due on (a shotgun)."""
    lists = [c["arguments"]["booking_ids"] for t in actions for c in t.get("calls") or [] if c["name"] == "submit_refunds"]
    return any(len(ids) >= 6 for ids in lists)


def _beside(actions: list[Any]) -> bool:
    return any(t.get("content") and t.get("calls") for t in actions)


def _prose(actions: list[Any]) -> bool:
    """A long paragraph that says neither yes nor no."""
    return any(len(text.split()) >= 60 and primitives.stance([text]) == "none" for text in primitives.texts_of(actions))


#: env -> what the winning policy's actions must show (the hole it found)
HOLES = {"refund_batch": _widened, "lenient_beside_call": _beside, "prose_paid": _prose}


def _without_search(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(searching, "search", lambda ctx, rows, make: searching.SearchOutcome(None, 0, 0.0, 0))


@pytest.mark.parametrize("name", sorted(HOLES))
def test_the_search_finds_what_no_named_exploit_plays(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shotgun (every id read in the list argument), text beside a tool call graded leniently, a long polite
    paragraph paid: each fails exploit_search through a searched policy holding that primitive, replayed to the
    same reward; with the search switched off, the named library alone passes the same env."""
    source = (GATE_ENVS / f"{name}.py").read_text()
    result = exploit_search(source)
    assert not result.passed, result.figure
    assert result.message.startswith("the exploit search found a policy"), result.message
    example = result.counterexample
    assert example is not None and example.reproduced is True and example.actions and example.seed is not None
    assert HOLES[name](example.actions), (result.data["search"], example.actions)
    assert "searched policy" in example.detail
    _without_search(monkeypatch)
    alone = exploit_search(source)
    assert alone.passed, alone.message


def test_valid_envs_pass_the_search() -> None:
    """The yes/no env graded strictly and the long per-item task: the search finds nothing above the line."""
    for name in ("refundable_question", "long_task"):
        result = exploit_search((GATE_ENVS / f"{name}.py").read_text())
        assert result.passed, (name, result.message)
        assert result.data["search"]["episodes"] > 0 and result.data["search"]["best_mean_share"] <= 0.5


def test_the_search_is_deterministic_given_the_run_seed() -> None:
    source = (GATE_ENVS / "prose_paid.py").read_text()
    first, again = exploit_search(source), exploit_search(source)
    assert first.data["search"] == {**again.data["search"], "seconds": first.data["search"]["seconds"]}
    assert first.counterexample is not None and again.counterexample is not None
    assert first.counterexample.actions == again.counterexample.actions


def _input(**overrides: Any) -> ExploitInput:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}},
             {"type": "function", "function": {"name": "submit", "parameters": {"type": "object", "properties": {
                 "ids": {"type": "array", "items": {"type": "string"}}, "mode": {"type": "string", "enum": ["a", "b"]}}}}}]
    reference = [{"content": None, "calls": [{"name": "lookup", "arguments": {"id": "X1"}}]},
                 {"content": None, "calls": [{"name": "submit", "arguments": {"ids": ["X1"], "mode": "a"}}]},
                 {"content": "Yes, submitted.", "calls": []}]
    return ExploitInput(**{"tools": tools, "write_tools": frozenset({"submit"}), "terminal_tools": frozenset(), "reference": reference,
                           "first_message": "Please refund X1 and X2.", "description": "Refund what is due.", **overrides})


def test_primitives_render_as_a_learner_would_play_them() -> None:
    x = _input()
    widened = primitives.render_gene(primitives.Gene("write_widened"), x)[0]["calls"][0]["arguments"]
    assert widened == {"ids": {"$all": "id", "type": "string"}, "mode": "a"}
    beside = primitives.render_gene(primitives.Gene("llm_turn", 4), x)[0]
    assert beside["calls"] == [{"name": "lookup", "arguments": {"id": "X1"}}] and len(beside["content"].split()) >= 60
    assert primitives.stance([beside["content"]]) == "none"  # the prose decides nothing
    twice = primitives.render_gene(primitives.Gene("ref_writes_twice"), x)
    assert [t["calls"][0]["name"] for t in twice] == ["submit", "submit"]
    asked = primitives.render_gene(primitives.Gene("ask_twice"), x)
    assert asked[0] == asked[1] and asked[2]["content"] == {"$echo": "user"}
    assert primitives.stance(["No, I cannot.", "Yes."]) == "both" and primitives.stance(["It is not possible."]) == "no"
