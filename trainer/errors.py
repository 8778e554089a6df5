"""One error root for the trainer, under the factory's, so the CLI prints one line for every failure."""

from __future__ import annotations

from schemas.errors import FactoryError, InputError


class TrainError(FactoryError):
    """A training run cannot go on; the message says what is wrong and how to fix it."""


class ChatTemplateError(TrainError):
    """The model's chat template cannot render a conversation turn by turn."""


class RunFileError(TrainError, InputError):
    """A file the trainer wrote into its run folder (``metrics.jsonl``, a checkpoint's ``state.json``) cannot be
    read back: bad input (exit 2), like any damaged state file; the one line names the file, where, and the fix."""
