"""A tiny handler for tests and benchmarks: echo, sleep, crash (os._exit), raise."""

from __future__ import annotations

import os
import time
from typing import Any, Callable


def echo(params: dict) -> Any:
    return params


def sleep(params: dict) -> Any:
    seconds = float(params.get("seconds", 1.0))
    time.sleep(seconds)
    return {"slept": seconds}


def crash(params: dict) -> Any:
    os.write(2, str(params.get("message", "crashing on purpose")).encode() + b"\n")
    os._exit(int(params.get("code", 3)))


def raise_(params: dict) -> Any:
    raise ValueError(params.get("message", "raised on purpose"))


def noisy(params: dict) -> Any:
    """Prints to stdout like careless env code would; the protocol must survive it."""
    print("stray output that must not corrupt the protocol")
    os.write(1, b"more stray bytes without a newline")
    return {"ok": True}


def whoami(params: dict) -> Any:
    import sys

    return {"uid": os.getuid(), "cwd": os.getcwd(), "pid": os.getpid(), "executable": sys.executable,
            "env": sorted(os.environ)}


METHODS: dict[str, Callable[[dict], Any]] = {
    "echo": echo,
    "sleep": sleep,
    "crash": crash,
    "raise": raise_,
    "whoami": whoami,
    "noisy": noisy,
}
