"""The exit-code contract every ``factory`` command keeps, and the signals that end a command cleanly.

    0    success
    1    the run failed: it could not finish (every episode errored, a check failed, a full disk, a crashed
         sandbox, an LLM that kept failing)
    2    bad input or usage: a flag, name, file, folder or config the user gave cannot be used; nothing ran
         that the fix would have to redo
    130  interrupted by Ctrl-C (SIGINT);  143  stopped by SIGTERM (a batch scheduler, ``timeout``)

An interrupted command keeps what it finished and says how to resume. ``factory sandbox exec`` is the one
exception: it exits with the sandboxed command's own code, as ``docker run`` does.

SIGTERM is turned into :class:`schemas.errors.Interrupted` (a ``KeyboardInterrupt``) for the whole process,
so every command's Ctrl-C path (keep what finished, say how to resume) serves a batch system's stop too, and
the exit code still says which signal it was.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from schemas.errors import FactoryError, InputError, Interrupted, interrupt_exit_code

OK, FAILED, BAD_INPUT = 0, 1, 2
INTERRUPTED, TERMINATED = 128 + int(signal.SIGINT), 128 + int(signal.SIGTERM)

CONTRACT = (
    "Exit codes: 0 success; 1 the run failed; 2 bad input or usage; 130 interrupted (Ctrl-C), 143 stopped (SIGTERM). "
    "An interrupted command keeps what it finished and says how to resume."
)
"""The contract in one paragraph, for ``factory --help`` and the README."""


_signal = {"received": 0, "reported": False}
"""The last stop signal and whether a command said so: typer turns an uncaught ``KeyboardInterrupt`` into a silent
exit 130, so ``main`` needs both to give SIGTERM its 143 and every stop its one line."""


def mark_reported() -> None:
    """A command printed its own line for the stop (what is kept, how to go on)."""
    _signal["reported"] = True


def stop_code(exc: BaseException) -> int:
    """130 or 143 for an interrupt, by the signal that raised it, even when a layer re-raised it as a plain
    ``KeyboardInterrupt`` (it is the signal the handler saw that counts)."""
    if isinstance(exc, Interrupted) or not _signal["received"]:
        return interrupt_exit_code(exc)
    return 128 + int(_signal["received"])


def after_stop(code: int) -> tuple[int, str | None]:
    """(exit code, line to print) for a command that ended with ``code``: a stop typer swallowed (its silent 130)
    gets the signal's own code and a line; anything else is left as it is."""
    received = int(_signal["received"])
    if code != INTERRUPTED or not received:
        return code, None
    line = None if _signal["reported"] else ("stopped by SIGTERM" if received == signal.SIGTERM else "interrupted")
    return 128 + received, line


REDELIVERIES = 20
"""How many times one stop is sent again after landing where it cannot end the command (see :func:`_swallowed`)."""

_redelivery = {"pending": False, "sent": 0, "in_hook": False}


def _send_again(signum: int) -> None:
    """Sends the stop again a moment later, from a thread nobody waits for (``threading.Thread.start`` waits
    for its thread, and the signal would land in that wait, inside the hook)."""
    _redelivery["pending"] = True
    _redelivery["sent"] += 1
    _thread.start_new_thread(lambda: (time.sleep(0.02), os.kill(os.getpid(), signum)), ())


def _swallowed(report: Any, previous: Any) -> None:
    """``sys.unraisablehook`` for the command's process. A stop that lands inside a finalizer, a weakref callback
    or an at-fork hook (``logging``'s lock, taken while ``subprocess`` forks) is printed by Python as "Exception
    ignored" and dropped: the command would run on and miss its 143. So the signal is sent again, and the
    handler raises it at the main thread's next bytecode, which is almost always ordinary code; each re-delivery
    that lands in a finalizer again is re-sent, up to ``REDELIVERIES`` times. Reports that follow while a
    re-sent stop is on its way (the unlocked lock's release failing) are the same stop's echo and are not
    printed; every other report goes to the previous hook."""
    _redelivery["in_hook"] = True
    try:
        exc = report.exc_value
        signum = int(_signal["received"])
        if isinstance(exc, Interrupted) and signum and _redelivery["sent"] < REDELIVERIES:
            if signal.getsignal(signum) is _raise_interrupted:
                _send_again(signum)
                return
        if not _redelivery["pending"]:
            previous(report)
    finally:
        _redelivery["in_hook"] = False


def _raise_interrupted(signum: int, frame: Any) -> None:
    _signal["received"] = signum
    if _redelivery["in_hook"]:  # raising here would be dropped once more: send it again instead
        _send_again(signum)
        return
    _redelivery["pending"] = False
    raise Interrupted(signum)


def install_signal_handlers() -> None:
    """SIGTERM and SIGINT raise :class:`Interrupted` in the main thread (with which signal it was), and a stop
    Python would drop in a finalizer is sent again (:func:`_swallowed`). Called once, by ``main``; a command with
    a finer stop (``factory train`` finishes its iteration) installs its own."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupted)
        signal.signal(signal.SIGINT, _raise_interrupted)
        previous = sys.unraisablehook
        sys.unraisablehook = lambda report: _swallowed(report, previous)


@contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """The same handlers for the span of a block, restored after (for commands run in-process by tests)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _input_error_types() -> tuple[type[BaseException], ...]:
    """Error types that always mean bad input, wherever they come from (imported lazily: heavy packages)."""
    from pydantic import ValidationError

    from schemas.files import InputFileError
    from env_registry.registry import RegistryError
    from factory.analyze.errors import AnalyzeInputError
    from factory.cli.paths import PathProblem
    from llm_clients.errors import LLMConfigError

    found: list[type[BaseException]] = [InputError, InputFileError, RegistryError, AnalyzeInputError, PathProblem,
                                        LLMConfigError, ValidationError]
    return tuple(found)


def exit_code(exc: BaseException) -> int:
    """The contract's code for an exception that ends a command: 130/143 for a stop, 2 for bad input, 1 for the rest."""
    if isinstance(exc, KeyboardInterrupt):
        return stop_code(exc)
    if isinstance(exc, _input_error_types()):
        return BAD_INPUT
    return FAILED


def is_input_error(exc: BaseException) -> bool:
    return not isinstance(exc, KeyboardInterrupt) and exit_code(exc) == BAD_INPUT


__all__ = ["BAD_INPUT", "CONTRACT", "FAILED", "FactoryError", "INTERRUPTED", "OK", "TERMINATED", "exit_code",
           "install_signal_handlers", "is_input_error", "signals_as_interrupt"]
