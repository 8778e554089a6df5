"""A stop that lands where Python drops exceptions (a finalizer, an at-fork hook) still ends the command.

A fresh-clone CI run saw SIGTERM land in ``logging``'s at-fork lock hook while ``factory sandbox exec`` forked
bwrap: Python printed "Exception ignored" and the command ran on to its timeout, exiting 1 instead of 143.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import gc, os, signal, sys, time
    from factory.cli.exits import install_signal_handlers

    install_signal_handlers()

    class Lands:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100000):  # the handler runs at a bytecode in here, inside the finalizer
                pass

    try:
        Lands()  # dropped at once: __del__ runs, the signal's Interrupted is swallowed there
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.01)
        print("missed")
    except KeyboardInterrupt as exc:
        print("stopped", type(exc).__name__)
    """
)


def test_a_sigterm_swallowed_in_a_finalizer_is_delivered_again() -> None:
    ran = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert ran.stdout.strip() == "stopped Interrupted", (ran.stdout, ran.stderr)
    assert "Exception ignored" not in ran.stderr and "Traceback" not in ran.stderr, ran.stderr


def test_other_unraisable_reports_still_reach_the_previous_hook() -> None:
    script = textwrap.dedent(
        """
        from factory.cli.exits import install_signal_handlers
        install_signal_handlers()
        class Breaks:
            def __del__(self):
                raise ValueError("a real bug in a finalizer")
        Breaks()
        print("went on")
        """
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert ran.stdout.strip() == "went on"
    assert "a real bug in a finalizer" in ran.stderr
