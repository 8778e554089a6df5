"""Routing labels: one token each in the base model's tokenizer, or the decision would read the wrong logit.

The decision compares next-token logits of the label tokens, so a label that splits into two tokens (" A"
vs "A", "AB", a non-Latin letter in a small vocabulary) would be scored by its first piece only. The check
is done twice: in isolation, and where the label is actually read, right after the prompt, so a tokenizer
that would merge the label with the prompt's last characters is caught as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from router.errors import LabelTokenError


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _pieces(tokenizer: Any, ids: list[int]) -> str:
    return " + ".join(repr(tokenizer.decode([i])) for i in ids)


def labels_for(alphabet: Sequence[str], n_options: int) -> list[str]:
    """The first ``n_options`` labels of the alphabet; says how to fix a menu that outgrows it."""
    if n_options > len(alphabet):
        raise LabelTokenError(
            f"the menu has {n_options} options (capabilities plus 'no adapter') but the label alphabet has only "
            f"{len(alphabet)} labels; pass a longer alphabet (e.g. add lowercase letters or digits that are one "
            f"token each)"
        )
    return list(alphabet[:n_options])


def label_token_ids(tokenizer: Any, labels: Sequence[str], context: str | None = None) -> list[int]:
    """Token id of each label. Raises :class:`LabelTokenError` naming the first label that is not exactly
    one token, alone or (when ``context`` is given) as the continuation of ``context``."""
    ids: list[int] = []
    for label in labels:
        alone = _encode(tokenizer, label)
        if len(alone) != 1:
            raise LabelTokenError(
                f"routing label {label!r} is {len(alone)} tokens in the base model's tokenizer "
                f"({_pieces(tokenizer, alone) if alone else 'nothing'}), not one; choose labels that are single "
                f"tokens, e.g. capital letters A-Z"
            )
        ids.append(alone[0])
    seen: dict[int, str] = {}
    for label, token in zip(labels, ids):
        if token in seen:
            raise LabelTokenError(f"routing labels {seen[token]!r} and {label!r} are the same token; use distinct labels")
        seen[token] = label
    if context is not None:
        base = _encode(tokenizer, context)
        for label, token in zip(labels, ids):
            joined = _encode(tokenizer, context + label)
            if joined != base + [token]:
                tail = joined[len(base) - 1 :] if len(joined) >= len(base) else joined
                raise LabelTokenError(
                    f"routing label {label!r} does not stay one token after the routing prompt (it tokenizes as "
                    f"{_pieces(tokenizer, tail)} there); choose labels the tokenizer keeps apart, e.g. capital letters"
                )
    return ids
