"""The root of every error the factory raises on purpose; callers catch one type, the CLI prints one line.

Two more roots carry the exit-code contract (``factory.cli.exits``) down to code that knows nothing of the CLI:
:class:`InputError` is bad input (exit 2: the user's to fix), :class:`Interrupted` is a stop by a signal
(exit 128 + the signal's number: 130 for Ctrl-C, 143 for SIGTERM).
"""

from __future__ import annotations

import signal


class FactoryError(Exception):
    """A factory step could not do what was asked; the message says what is wrong and how to fix it."""


class InputError(FactoryError):
    """Bad input: a name, file, folder or setting the user gave cannot be used (exit 2); the message says how to fix it."""


class Interrupted(KeyboardInterrupt):
    """A command was stopped by a signal (Ctrl-C, or SIGTERM from a batch system or ``timeout``).

    A ``KeyboardInterrupt``, so every path that keeps finished work on Ctrl-C keeps it on SIGTERM too;
    ``signum`` says which signal, so the exit code can say it as well (128 + signum).
    """

    def __init__(self, signum: int = signal.SIGINT, message: str = "") -> None:
        super().__init__(message or signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def interrupt_exit_code(exc: BaseException) -> int:
    """130 for Ctrl-C (a plain ``KeyboardInterrupt``), 128 + signum for an :class:`Interrupted`."""
    return exc.exit_code if isinstance(exc, Interrupted) else 128 + int(signal.SIGINT)
