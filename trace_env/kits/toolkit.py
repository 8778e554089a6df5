"""Turn a kit's plain tool functions into a mixin of ``@sdk.tool`` methods, so each tool is written once.

A kit writes each tool as ``function(db, **arguments)`` (usable on the host and for computing expected end
states) and exposes them to envs as ``Mixin = tool_mixin("Mixin", functions, doc)``: an env inherits the
mixin, lists the tools it exposes in ``tool_names``, and overrides one by defining a method of that name.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from trace_env import sdk

__all__ = ["tool_mixin"]


def tool_method(function: Callable[..., Any]) -> Callable[..., Any]:
    """``method(self, db, ...)`` calling ``function(db, ...)``, marked as the tool of that name."""

    @functools.wraps(function)
    def method(self, db, *arguments, **named):
        return function(db, *arguments, **named)

    parameters = list(inspect.signature(function).parameters.values())
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__signature__ = inspect.Signature([self_parameter, *parameters])  # type: ignore[attr-defined]
    del method.__wrapped__  # the signature above is the method's own
    return sdk.tool(method)


def tool_mixin(name: str, functions: list[Callable[..., Any]], doc: str) -> type:
    """A class with one ``@sdk.tool`` method per function, named after the function."""
    namespace: dict[str, Any] = {"__doc__": doc, "__module__": functions[0].__module__}
    namespace.update({function.__name__: tool_method(function) for function in functions})
    return type(name, (), namespace)
