"""The root of every error the factory raises on purpose; callers catch one type, the CLI prints one line."""

from __future__ import annotations


class FactoryError(Exception):
    """A factory step could not do what was asked; the message says what is wrong and how to fix it."""
