"""The ``calculate`` tool of both τ² domains, without ``eval``: one copy for every env and for the host.

τ² checks that the expression holds only ``0123456789+-*/(). `` and then hands it to Python's ``eval``; the
result is ``str(round(float(value), 2))``. This module parses the same language (numbers, ``+ - * /``, the
``**`` and ``//`` operators those characters also spell, unary signs, parentheses) with Python's precedence
and evaluates it with Python's own int/float operators, so results - and the wording of division-by-zero
errors - are the ones τ² gives. Syntax errors are worded more plainly than CPython's parser does.

Plain stdlib: the kits import it inside the sandbox and ``factory analyze`` may import it on the host.
"""

from __future__ import annotations

import re

from trace_env.sdk import ToolError

__all__ = ["ALLOWED_CHARACTERS", "calculate", "evaluate"]

ALLOWED_CHARACTERS = frozenset("0123456789+-*/(). ")
MAX_TOKENS = 10_000
MAX_DEPTH = 100  # nesting levels (CPython's parser stops at 200: "too many nested parentheses")
MAX_POWER_BITS = 100_000  # an integer power beyond this would take eval minutes; τ² would hang, we refuse

_TOKEN = re.compile(r"\s*(?:(\d+\.\d*|\.\d+|\d+)|(\*\*|//|[-+*/()])|(\S))")


def _tokens(expression: str) -> list[str]:
    tokens = []
    for number, operator, junk in _TOKEN.findall(expression):
        if junk:
            raise ToolError("Invalid expression")
        tokens.append(number or operator)
    if len(tokens) > MAX_TOKENS:
        raise ToolError("Expression is too long")
    return tokens


def _number(token: str) -> int | float:
    if "." in token:
        return float(token)
    if len(token) > 1 and token.startswith("0") and token.strip("0"):
        raise ToolError("leading zeros in decimal integer literals are not permitted")
    return int(token)


class _Parser:
    """Recursive descent over Python's grammar for these operators (``**`` binds tighter than a unary sign
    on its left and is right-associative)."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.at = 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ToolError("Invalid expression")
        self.at += 1
        return token

    def sum(self, depth: int) -> int | float:
        value = self.product(depth)
        while self.peek() in ("+", "-"):
            operator = self.take()
            right = self.product(depth)
            value = value + right if operator == "+" else value - right
        return value

    def product(self, depth: int) -> int | float:
        value = self.unary(depth)
        while self.peek() in ("*", "/", "//"):
            operator = self.take()
            right = self.unary(depth)
            if operator == "*":
                value = value * right
            elif operator == "/":
                value = value / right
            else:
                value = value // right
        return value

    def unary(self, depth: int) -> int | float:
        if self.peek() in ("+", "-"):
            if depth > MAX_DEPTH:
                raise ToolError("too many nested parentheses")
            sign = self.take()
            value = self.unary(depth + 1)
            return -value if sign == "-" else +value
        return self.power(depth)

    def power(self, depth: int) -> int | float:
        base = self.atom(depth)
        if self.peek() != "**":
            return base
        self.take()
        exponent = self.unary(depth + 1)
        if isinstance(base, int) and isinstance(exponent, int) and exponent > 0:
            if abs(base) > 1 and exponent * max(1, abs(base).bit_length()) > MAX_POWER_BITS:
                raise ToolError("Result is too large")
        return base**exponent

    def atom(self, depth: int) -> int | float:
        token = self.take()
        if token == "(":
            if depth >= MAX_DEPTH:
                raise ToolError("too many nested parentheses")
            value = self.sum(depth + 1)
            if self.take() != ")":
                raise ToolError("Invalid expression")
            return value
        if token[0].isdigit() or token[0] == ".":
            return _number(token)
        raise ToolError("Invalid expression")


def evaluate(expression: str) -> int | float:
    """The exact Python value of ``expression`` (what ``eval`` gives), or :class:`ToolError` saying why not."""
    if not all(char in ALLOWED_CHARACTERS for char in expression):
        raise ToolError("Invalid characters in expression")
    parser = _Parser(_tokens(expression))
    try:
        value = parser.sum(0)
    except ZeroDivisionError as exc:
        raise ToolError(str(exc)) from None
    except OverflowError as exc:
        raise ToolError(str(exc)) from None
    except RecursionError:  # deep nesting of signs and powers within the depth limit on a small stack
        raise ToolError("too many nested parentheses") from None
    if parser.peek() is not None:
        raise ToolError("Invalid expression")
    if isinstance(value, complex):  # a negative number to a fractional power
        raise ToolError("can't convert complex to float")
    return value


def calculate(expression: str) -> str:
    """τ²'s ``calculate``: the value rounded to 2 decimals, as text (``"(1204.5 - 4.5) * 2 / 3"`` -> ``"800.0"``)."""
    value = evaluate(expression)
    try:
        return str(round(float(value), 2))
    except OverflowError as exc:
        raise ToolError(str(exc)) from None
