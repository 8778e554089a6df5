"""A small list-price table (USD per million tokens) so runs can report what they cost.

Prices are public list prices at the time of writing; edit ``PRICES`` when they change. A model that is not
in the table gets ``cost_usd = None`` rather than a guess. Dated snapshots (``gpt-4.1-2025-04-14``,
``claude-sonnet-4-5-20250929``) resolve to their family by longest prefix.
"""

from __future__ import annotations

PRICES: dict[str, tuple[float, float]] = {
    # OpenAI: (input, output) per 1M tokens
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    # Anthropic
    "claude-opus-4-5": (5.00, 25.00),
    "claude-opus-4-1": (15.00, 75.00),
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-3-5-haiku": (0.80, 4.00),
}


def price_for(model: str) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens, by exact name or longest ``family-`` prefix; None if unknown."""
    name = model.rsplit("/", 1)[-1].lower()
    if name in PRICES:
        return PRICES[name]
    best = None
    for family in PRICES:
        if name.startswith(family + "-") and (best is None or len(family) > len(best)):
            best = family
    return PRICES[best] if best else None


def cost_usd(model: str, input_tokens: int | None, output_tokens: int | None) -> float | None:
    """Cost of one call, or None when the price or the token counts are unknown."""
    price = price_for(model)
    if price is None or input_tokens is None or output_tokens is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
