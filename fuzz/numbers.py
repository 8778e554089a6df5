"""Numbers written in the agent's words, and their near misses: what tells a reward that reads amounts from one
that only looks for something like them.

A reward that grades a stated amount with a substring test (the first digits), a loose tolerance or a leading
digit alone pays a wrong amount. A leading-digit change does not show it (a two-digit substring test still
fails it); a near miss does: the last digit changed, the amount a tenth higher, a digit dropped or appended,
half a unit off. The exploit search says each of these in place of the truth's amount, and judges it only
where the amount is demonstrably graded: the reference with that amount left out (:func:`without`) loses
reward on that seed. An amount the reference merely mentions (a plan, a courtesy) is never judged.
"""

from __future__ import annotations

import re
from typing import Callable

#: A written number: an optional ``$``, the whole part (with thousands commas or not), an optional fraction.
NUMBER = re.compile(r"(?<![\w.])(\$?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?")
LEFT_OUT = "the amount"


def value(match: re.Match[str]) -> float:
    return float(match.group(2).replace(",", "") + (match.group(3) or ""))


def written(sign: str, amount: float, decimals: int, commas: bool) -> str:
    """``amount`` written in the style of the number it replaces (sign, decimals, thousands commas)."""
    text = f"{amount:,.{decimals}f}" if commas else f"{amount:.{decimals}f}"
    return sign + text


def _parts(match: re.Match[str]) -> tuple[str, str, str]:
    return match.group(1), match.group(2), match.group(3) or ""


def leading_digit(match: re.Match[str]) -> str:
    sign, whole, fraction = _parts(match)
    return f"{sign}{str((int(whole[0]) + 1) % 10 or 1)}{whole[1:]}{fraction}"


def last_digit(match: re.Match[str]) -> str:
    """The last written digit one higher (``690`` -> ``691``, ``$12.50`` -> ``$12.51``): ±1 in the last place."""
    text = match.group(0)
    return text[:-1] + str((int(text[-1]) + 1) % 10)


def tenth_more(match: re.Match[str]) -> str:
    sign, whole, fraction = _parts(match)
    decimals = max(0, len(fraction) - 1)
    amount = round(value(match) * 1.1, decimals)
    if amount == value(match):
        amount += 1
    return written(sign, amount, decimals, "," in whole)


def digit_dropped(match: re.Match[str]) -> str | None:
    sign, whole, fraction = _parts(match)
    digits = whole.replace(",", "")
    return f"{sign}{digits[:-1]}{fraction}" if len(digits) >= 2 else None


def digit_appended(match: re.Match[str]) -> str:
    sign, whole, fraction = _parts(match)
    return f"{sign}{whole.replace(',', '')}5{fraction}"


def half_off(match: re.Match[str]) -> str:
    """Half a unit more, written with cents (``$690`` -> ``$690.50``): a tolerance of a whole unit pays it."""
    sign, whole, fraction = _parts(match)
    return written(sign, value(match) + 0.5, max(2, len(fraction) - 1), "," in whole)


#: name -> how one written number becomes its near miss (None: no such miss for this number).
NEAR_MISSES: dict[str, Callable[[re.Match[str]], str | None]] = {
    "leading digit": leading_digit, "last digit": last_digit, "a tenth more": tenth_more,
    "a digit dropped": digit_dropped, "a digit appended": digit_appended, "half a unit off": half_off,
}


def replace(text: str, target: float, change: Callable[[re.Match[str]], str | None]) -> str:
    """``text`` with every written ``target`` changed by ``change`` (kept where it has no such change)."""
    return NUMBER.sub(lambda m: (change(m) or m.group(0)) if value(m) == target else m.group(0), text)


def without(text: str, target: float) -> str:
    """``text`` with every written ``target`` left out (replaced by a neutral noun phrase)."""
    return NUMBER.sub(lambda m: LEFT_OUT if value(m) == target else m.group(0), text)


#: Below this, one more is a near miss (a count, an amount); above it an integer is a magnitude in fine units
#: (epoch seconds, milliseconds) where one more is the same value for any sensible reward.
COUNT_LIMIT = 100_000


def near_argument(amount: int | float) -> list[int | float]:
    """Near misses of a numeric argument: one more (an integer count or amount only), and a tenth more."""
    tenth = round(amount * 1.1, 2) if isinstance(amount, float) else round(amount * 1.1)
    one_more = [amount + 1] if isinstance(amount, int) and abs(amount) < COUNT_LIMIT else []
    return list(dict.fromkeys(v for v in (*one_more, tenth) if v != amount))
