"""Errors the router raises on purpose: each names what is wrong and how to fix it, so the CLI prints one line."""

from __future__ import annotations

from schemas.errors import FactoryError


class RouterError(FactoryError, ValueError):
    """A routing request that cannot be carried out (bad menu, labels, adapters or inputs)."""


class LabelTokenError(RouterError):
    """A routing label is not exactly one token in the base model's tokenizer (or two labels share a token)."""


class DemoError(RouterError):
    """No successful reference trajectory could be obtained from a capability's registered env."""


class AdapterError(RouterError):
    """An adapter folder is missing, unreadable, or does not fit the base model."""
