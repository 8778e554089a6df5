"""Generic JSON-lines worker: ``python -m sandbox.worker HANDLER_MODULE``.

Runs inside the sandbox. The handler module exposes ``METHODS: dict[str, Callable[[dict], Any]]``.
One JSON request per stdin line -> one JSON response per stdout line:

    {"id": 1, "method": "echo", "params": {...}}  ->  {"id": 1, "result": ...}
                                                  |  {"id": 1, "error": {"type", "message", "traceback"}}

The first line written is ``{"id": null, "event": "ready", ...}`` once the handler imported (or
an error line and exit 1 if it did not). Every exception from a method is returned, never
raised; a bad input line gets an error with id null; the loop ends only at stdin EOF.

The protocol owns the real stdout: fd 1 is re-pointed at stderr before the handler is imported,
so a stray ``print`` in untrusted env code cannot corrupt the stream.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from typing import Any, Callable

_TB_LIMIT = 4000


def _error(exc: BaseException) -> dict[str, Any]:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"type": type(exc).__name__, "message": str(exc), "traceback": tb[-_TB_LIMIT:]}


def _dumps(obj: dict[str, Any]) -> str:
    try:
        return json.dumps(obj, default=str, allow_nan=True)
    except Exception as e:  # noqa: BLE001 - e.g. circular structures: report, do not die
        return json.dumps({"id": obj.get("id"), "error": {"type": "SerializationError", "message": str(e)[:2000]}})


def serve(methods: dict[str, Callable[[dict], Any]], inp, out, info: dict[str, Any] | None = None) -> None:  # type: ignore[no-untyped-def]
    """The request loop (separate from main() so it can be tested in-process)."""

    def send(obj: dict[str, Any]) -> None:
        out.write(_dumps(obj) + "\n")
        out.flush()

    send({"id": None, "event": "ready", "pid": os.getpid(), "methods": sorted(methods), **(info or {})})
    for raw in inp:
        if not raw.strip():
            continue
        req_id: Any = None
        try:
            req = json.loads(raw)
            if not isinstance(req, dict):
                raise ValueError("request must be a JSON object")
            req_id = req.get("id")
            method = req.get("method")
            params = req.get("params", {})
            if not isinstance(method, str):
                raise ValueError("request needs a string 'method'")
            if params is None:
                params = {}
            if not isinstance(params, dict):
                raise ValueError("'params' must be an object")
        except Exception as e:  # noqa: BLE001
            err = _error(e)
            err["type"] = "BadRequest"
            send({"id": req_id if isinstance(req_id, (int, str)) else None, "error": err})
            continue
        fn = methods.get(method)
        if fn is None:
            send({"id": req_id, "error": {"type": "MethodNotFound", "message": f"unknown method {method!r}",
                                          "traceback": ""}})
            continue
        try:
            result = fn(params)
        except BaseException as e:  # noqa: BLE001 - SystemExit/KeyboardInterrupt from env code too
            send({"id": req_id, "error": _error(e)})
            continue
        send({"id": req_id, "result": result})


def _with_hash_seed(argv: list[str]) -> list[str]:
    """``HANDLER --hash-seed N``: string hashing is fixed when the interpreter starts, so re-exec with
    ``PYTHONHASHSEED=N`` unless it is already set to that."""
    if len(argv) == 3 and argv[1] == "--hash-seed" and argv[2].isdigit():
        if os.environ.get("PYTHONHASHSEED") != argv[2]:
            env = dict(os.environ, PYTHONHASHSEED=argv[2])
            os.execve(sys.executable, [sys.executable, "-m", "sandbox.worker", *argv], env)
        return argv[:1]
    return argv


def main(argv: list[str] | None = None) -> int:
    argv = _with_hash_seed(list(sys.argv[1:] if argv is None else argv))
    # Keep the real stdout for the protocol; everything else printing to fd 1 goes to stderr.
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    inp = sys.stdin
    if len(argv) != 1:
        proto.write(_dumps({"id": None, "error": {"type": "UsageError",
                                                  "message": "usage: python -m sandbox.worker HANDLER_MODULE [--hash-seed N]"}}) + "\n")
        proto.flush()
        return 2
    try:
        module = importlib.import_module(argv[0])
        methods = getattr(module, "METHODS")
        if not isinstance(methods, dict):
            raise TypeError(f"{argv[0]}.METHODS must be a dict, got {type(methods).__name__}")
    except BaseException as e:  # noqa: BLE001
        proto.write(_dumps({"id": None, "error": _error(e)}) + "\n")
        proto.flush()
        return 1
    serve(methods, inp, proto, {"handler": argv[0]})
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    # stdin closed (the host went away) or a fatal start error: leave now, even if env code
    # started non-daemon threads that would otherwise keep this process alive.
    os._exit(code)
