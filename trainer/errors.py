"""One error root for the trainer, under the factory's, so the CLI prints one line for every failure."""

from __future__ import annotations

from schemas.errors import FactoryError


class TrainError(FactoryError):
    """A training run cannot go on; the message says what is wrong and how to fix it."""


class ChatTemplateError(TrainError):
    """The model's chat template cannot render a conversation turn by turn."""
