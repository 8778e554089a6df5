"""The one-token label check, on the tiny model's real byte-level BPE tokenizer."""

from __future__ import annotations

import pytest

from router.errors import LabelTokenError
from router.labels import label_token_ids, labels_for
from router.schema import RouterConfig


def test_capital_letters_are_one_distinct_token_each(tokenizer) -> None:
    letters = list("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    ids = label_token_ids(tokenizer, letters, context="<|im_start|>assistant\n")
    assert len(set(ids)) == 26
    assert [tokenizer.decode([i]) for i in ids] == letters


@pytest.mark.parametrize("bad", ["AB", "Capability", "日"])
def test_a_multi_token_label_is_refused_by_name(tokenizer, bad: str) -> None:
    with pytest.raises(LabelTokenError) as caught:
        label_token_ids(tokenizer, ["A", bad, "C"])
    message = str(caught.value)
    assert repr(bad) in message and "not one" in message and "\n" not in message


def test_a_label_that_merges_with_the_prompt_is_refused(tokenizer) -> None:
    # "ation" is one token alone, but right after "reserv" the tokenizer writes "reservation" as one token.
    assert label_token_ids(tokenizer, ["A", "ation"]) and len(tokenizer("ation", add_special_tokens=False).input_ids) == 1
    with pytest.raises(LabelTokenError, match="'ation' does not stay one token"):
        label_token_ids(tokenizer, ["A", "ation"], context="reserv")


def test_labels_sharing_a_token_are_refused(tokenizer) -> None:
    with pytest.raises(ValueError, match="distinct"):
        RouterConfig(alphabet=["A", "A"])
    with pytest.raises(LabelTokenError, match="same token"):
        label_token_ids(tokenizer, ["A", "A"])


def test_an_alphabet_too_short_for_the_menu_says_so() -> None:
    assert labels_for(list("ABCD"), 3) == ["A", "B", "C"]
    with pytest.raises(LabelTokenError, match="4 options .* only 3 labels"):
        labels_for(list("ABC"), 4)


def test_the_router_checks_its_labels_against_the_base_tokenizer(tokenizer, menu) -> None:
    from router.prompt import PromptBuilder

    builder = PromptBuilder(tokenizer, menu, RouterConfig())
    assert builder.labels == ["A", "B", "C", "D"]  # three capabilities and "no adapter"
    with pytest.raises(LabelTokenError, match="'10' is 2 tokens"):
        PromptBuilder(tokenizer, menu, RouterConfig(alphabet=["1", "2", "3", "10"]))
