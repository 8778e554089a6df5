"""The env process: ``python -m sandbox.worker HANDLER [--unchecked] [--hash-seed N] [--shimmed PID]``. INSIDE.

The handler module exposes ``METHODS: dict[str, Callable[[dict], Any]]``; env code runs in this process, behind
those methods. One JSON request per stdin line -> one JSON reply per line on the protocol stream:

    {"id": 1, "method": "echo", "params": {...}}  ->  {"id": 1, "result": ...}
                                                  |  {"id": 1, "error": {"type", "message", "traceback"}}
    {"sync": N}                                   ->  {"sync": N}   (answered by this loop, never by env code)

The first line written is ``{"id": null, "event": "ready", ...}`` once the handler imported (or an error line
and exit 1 if it did not). Every exception from a method is returned, never raised; a bad input line gets an
error with id null; the loop ends only at stdin EOF.

In a sandbox this process is started by the trusted shim (:mod:`sandbox.shim`, ``--shimmed``) on two private
pipes: the shim alone holds the host channel, gives this process its own request ids, and relays one reply per
request only after a ``sync`` shows nothing else followed it. Started directly (the layout before the shim,
kept for the benchmark's before/after), it speaks the same protocol to the host itself.

What this process sends is the env's answer, and the host validates it by shape. Two things keep trusted
code in here honest against plain-Python tampering by env code (see :mod:`sandbox.integrity`):

- The protocol owns the real stdout: fd 1 is re-pointed at stderr before the handler is imported (a stray
  ``print`` cannot corrupt the stream) and replies go out through ``os.write`` on a private fd. The encoder
  and decoder are the C ones (``_json``), captured with ``os.write``/``os.read`` when this module is imported,
  before any env code exists. Results are copied into exact built-in types (``_plain``) first, so the encoder
  sees plain data.
- After every call the trusted modules are compared with a snapshot taken before env code ran
  (:class:`sandbox.integrity.Snapshot`); a difference ends the process with a fatal ``IntegrityError``.
"""

from __future__ import annotations

import _json
import builtins
import importlib
import os
import sys
import traceback
from typing import Any, Callable, Iterable, Iterator

from sandbox.integrity import Snapshot

_TB_LIMIT = 4000
#: How a sync request (and its answer) starts: ``{"sync":N}``, written by the shim.
SYNC_PREFIX = '{"sync":'
MAX_DEPTH = 100
MAX_REPLY_BYTES = 32 * 1024 * 1024

# --- captured before any env code is imported ------------------------------------------------------
_write = os.write
_read = os.read
_waitpid, _WNOHANG = os.waitpid, os.WNOHANG
_reaping: list[bool] = []  # non-empty once this process is a child subreaper
_str, _int, _float, _bool, _dict, _list, _tuple, _type = str, int, float, bool, dict, list, tuple, type
_isinstance, _len, _id, _map, _repr = isinstance, len, id, map, repr
_dict_items, _list_iter, _tuple_iter = dict.items, list.__iter__, tuple.__iter__
_str_copy, _int_copy, _float_copy = str.__str__, int.__int__, float.__float__
_float_repr, _int_repr = float.__repr__, int.__repr__


def _no_default(obj: object) -> object:
    raise TypeError(f"cannot encode {type(obj).__name__}")


# separators without spaces; ensure_ascii: the stream is plain ASCII whatever the env returns
_encoder = _json.make_encoder(None, _no_default, _json.encode_basestring_ascii, None, ":", ",", False, False, True)


def _encode(obj: object) -> str:
    return "".join(_encoder(obj, 0))


def _scanner() -> Callable[[str, int], tuple[Any, int]]:
    import json.decoder

    return _json.make_scanner(json.decoder.JSONDecoder())


_scan = _scanner()


class SerializationError(Exception):
    """A result that cannot go to the host as JSON (too deep, circular, too large, bad key)."""


def _plain(value: object, depth: int = 0) -> object:
    """A copy of ``value`` in exact JSON types, read through the base types' own methods."""
    if depth > MAX_DEPTH:
        raise SerializationError(f"result nested deeper than {MAX_DEPTH} levels (or circular)")
    kind = _type(value)
    if value is None or kind is _bool:
        return value
    if kind is _str or kind is _int or kind is _float:
        return value
    if _isinstance(value, _str):
        return _str_copy(value)
    if _isinstance(value, _bool):
        return _bool(value)
    if _isinstance(value, _int):
        return _int_copy(value)
    if _isinstance(value, _float):
        return _float_copy(value)
    if _isinstance(value, _dict):
        return {_key(k): _plain(v, depth + 1) for k, v in _dict_items(value)}
    if _isinstance(value, _list):
        return [_plain(v, depth + 1) for v in _list_iter(value)]
    if _isinstance(value, _tuple):
        return [_plain(v, depth + 1) for v in _tuple_iter(value)]
    text = _str(value)  # sets, datetimes, objects: their text, as json.dumps(default=str) gave before
    return _str_copy(text) if _isinstance(text, _str) else _repr(text)


def _key(key: object) -> str:
    kind = _type(key)
    if kind is _str:
        return key  # type: ignore[return-value]
    if _isinstance(key, _str):
        return _str_copy(key)
    if key is None or _isinstance(key, _bool):
        return {None: "null", True: "true", False: "false"}[key]  # type: ignore[index]
    if _isinstance(key, _int):
        return _int_repr(key)
    if _isinstance(key, _float):
        return _float_repr(key)
    raise SerializationError(f"dict keys must be str, int, float, bool or None, not {kind.__name__}")


def _error(exc: BaseException, kind: str | None = None) -> dict[str, Any]:
    try:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        message = str(exc)
    except BaseException as e:  # noqa: BLE001 - an exception whose __str__ raises
        tb, message = "", f"<unprintable exception: {type(e).__name__}>"
    return {"type": kind or type(exc).__name__, "message": _plain(message), "traceback": _plain(tb[-_TB_LIMIT:])}


def _dumps(obj: dict[str, Any]) -> str:
    try:
        text = _encode(_plain(obj))
    except (SerializationError, TypeError, ValueError, RecursionError) as e:
        return _encode({"id": _plain(obj.get("id")), "error": {"type": "SerializationError", "message": _str(e)[:2000], "traceback": ""}})
    if _len(text) > MAX_REPLY_BYTES:
        return _encode({"id": _plain(obj.get("id")), "error": {
            "type": "SerializationError", "message": f"reply of {_len(text)} bytes is over {MAX_REPLY_BYTES}", "traceback": ""}})
    return text


def _loads(line: str) -> Any:
    obj, end = _scan(line, 0)
    if line[end:].strip():
        raise ValueError("extra data after the JSON value")
    return obj


# --- the loop ------------------------------------------------------------------------------------------


def serve(methods: dict[str, Callable[[dict], Any]], inp: Iterable[str], out: Any, info: dict[str, Any] | None = None,
          checked: bool = True, snapshot: Snapshot | None = None) -> None:
    """The request loop (separate from main() so it can be tested in-process). ``checked=False`` skips
    the integrity check (only the benchmark asks, to measure its cost). ``snapshot``: one taken before any env
    code ran, in the template process this one was forked from (:mod:`sandbox.template`)."""
    if checked and snapshot is None:
        snapshot = Snapshot()
    elif not checked:
        snapshot = None
    helpers = [(f, f.__code__) for f in (_plain, _key, _dumps, _error, _encode, _loads, Snapshot.changes, _send_to, subcall)]
    methods = dict(methods)
    inp = iter(inp)
    _channel[:] = [inp, out]

    def send(obj: dict[str, Any]) -> None:
        _send_to(out, _dumps(obj) + "\n")

    send({"id": None, "event": "ready", "pid": os.getpid(), "methods": sorted(methods), **(info or {})})
    for raw in inp:
        if raw.startswith(SYNC_PREFIX):  # the shim asks whether anything followed the last reply: answer as asked
            _send_to(out, raw.rstrip("\r\n") + "\n")
            continue
        if not raw.strip():
            continue
        req_id: Any = None
        try:
            req = _loads(raw)
            if type(req) is not dict:
                raise ValueError("request must be a JSON object")
            req_id = req.get("id")
            method = req.get("method")
            params = req.get("params", {})
            if type(method) is not str:
                raise ValueError("request needs a string 'method'")
            if params is None:
                params = {}
            if type(params) is not dict:
                raise ValueError("'params' must be an object")
        except Exception as e:  # noqa: BLE001
            send({"id": req_id if type(req_id) in (int, str) else None, "error": _error(e, "BadRequest")})
            continue
        fn = methods.get(method)
        if fn is None:
            send({"id": req_id, "error": {"type": "MethodNotFound", "message": f"unknown method {method!r}", "traceback": ""}})
            continue
        try:
            reply: dict[str, Any] = {"id": req_id, "result": fn(params)}
        except BaseException as e:  # noqa: BLE001 - SystemExit/KeyboardInterrupt from env code too
            reply = {"id": req_id, "error": _error(e)}
        _reap_orphans()
        swapped = [f"the code of {f.__name__} was replaced" for f, code in helpers if f.__code__ is not code]
        changed = swapped or (snapshot.changes() if snapshot is not None else [])
        if changed:
            shown = "; ".join(changed[:5]) + (f"; and {len(changed) - 5} more" if len(changed) > 5 else "")
            send({"id": req_id, "error": {"type": "IntegrityError", "fatal": True, "traceback": "",
                                          "message": f"env code changed trusted code or state: {shown}"}})
            for raw in inp:  # under the shim, the sync that follows every reply; then this process ends
                if raw.startswith(SYNC_PREFIX):
                    _send_to(out, raw.rstrip("\r\n") + "\n")
                break
            return
        send(reply)


_channel: list[Any] = []  # [request lines, protocol out] while serving: the route of :func:`subcall`


class SubcallError(Exception):
    """What the shim answered to a sub-call with an error: its ``type`` and ``message``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def subcall(method: str, params: dict[str, Any]) -> Any:
    """A call to an episode process of its own, or to a one-shot process, through the shim (``{"sub": method,
    "params": ...}`` on the protocol stream; the answer is the next request line): how the gate's probes play
    episodes in fresh processes, each seeing only what training sends, and ask every other env method of one. Raises :class:`SubcallError` with the answer's error."""
    if not _channel:
        raise RuntimeError("sub-calls need the shim's fresh-process mode")
    inp, out = _channel
    _send_to(out, _encode({"sub": _plain(method), "params": _plain(params)}) + "\n")
    raw = next(inp, None)
    if raw is None:
        raise EOFError("the shim went away during a sub-call")
    answer = _loads(raw)
    if type(answer) is not dict:
        raise SubcallError("BadReply", "the shim's answer to a sub-call is not an object")
    if "error" in answer:
        err = answer["error"] if type(answer["error"]) is dict else {}
        raise SubcallError(_str(err.get("type", "Error")), _str(err.get("message", "")))
    return answer.get("result")


def load_handler(name: str) -> dict[str, Callable[[dict], Any]]:
    """The handler module's ``METHODS`` (imported here, before any env code exists)."""
    module = importlib.import_module(name)
    methods = getattr(module, "METHODS")
    if not isinstance(methods, dict):
        raise TypeError(f"{name}.METHODS must be a dict, got {type(methods).__name__}")
    return methods


def _reap_orphans() -> None:
    """Collect exited orphans re-parented to this worker (see :func:`_subreaper`), after each call."""
    while _reaping:
        try:
            pid, _ = _waitpid(-1, _WNOHANG)
        except (ChildProcessError, OSError):
            return
        if pid == 0:
            return


def _send_to(out: Any, text: str) -> None:
    if isinstance(out, int):
        data = text.encode("ascii")
        while data:
            data = data[_write(out, data):]
    else:
        out.write(text)
        out.flush()


def _lines(fd: int) -> Iterator[str]:
    """Request lines from ``fd`` through the captured ``os.read`` (not ``sys.stdin``, which env code can rebind)."""
    pending = b""
    while True:
        chunk = _read(fd, 1 << 16)
        if not chunk:
            if pending.strip():
                yield pending.decode("utf-8", "replace")
            return
        pending += chunk
        if b"\n" in chunk:
            *complete, pending = pending.split(b"\n")
            for line in complete:
                yield line.decode("utf-8", "replace")


def _with_hash_seed(argv: list[str]) -> list[str]:
    """``HANDLER --hash-seed N``: string hashing is fixed when the interpreter starts, so re-exec with
    ``PYTHONHASHSEED=N`` unless it is already set to that."""
    if len(argv) >= 3 and argv[-2] == "--hash-seed" and argv[-1].isdigit():
        if os.environ.get("PYTHONHASHSEED") != argv[-1]:
            env = dict(os.environ, PYTHONHASHSEED=argv[-1])
            os.execve(sys.executable, [sys.executable, "-m", "sandbox.worker", *argv], env)
        return argv[:-2]
    return argv


def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        return ctypes.CDLL(None).prctl(option, value, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - not Linux, or no libc
        return False


def _subreaper() -> None:
    """Orphans of env code (double-forked daemons) re-parent to this worker, not to the sandbox's PID 1, so
    killing the worker's process tree kills them too (Docker: several workers share one container)."""
    if _prctl(36, 1):  # PR_SET_CHILD_SUBREAPER
        _reaping.append(True)


def _follow_shim(parent: str) -> None:
    """Under the shim: die with it (PR_SET_PDEATHSIG), and leave at once if it is already gone."""
    _prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    if not parent.isdigit() or os.getppid() != int(parent):
        os._exit(1)


USAGE = "usage: python -m sandbox.worker HANDLER_MODULE [--unchecked] [--hash-seed N] [--shimmed PID]"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    shim_pid = None
    if len(argv) >= 2 and argv[-2] == "--shimmed":
        shim_pid, argv = argv[-1], argv[:-2]
        _follow_shim(shim_pid)
    argv = _with_hash_seed(argv)
    checked = "--unchecked" not in argv
    argv = [a for a in argv if a != "--unchecked"]
    # Keep the real stdout for the protocol; everything else printing to fd 1 goes to stderr.
    proto = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if len(argv) != 1:
        _send_to(proto, _dumps({"id": None, "error": {"type": "UsageError", "message": USAGE}}) + "\n")
        return 2
    if shim_pid is None:
        _subreaper()
    try:
        methods = load_handler(argv[0])
    except BaseException as e:  # noqa: BLE001
        _send_to(proto, _dumps({"id": None, "error": _error(e)}) + "\n")
        return 1
    serve(methods, _lines(0), proto, {"handler": argv[0], "integrity_checked": checked}, checked=checked)
    return 0


if __name__ == "__main__":
    code = main()
    builtins.print(end="", file=sys.stderr, flush=True)
    # stdin closed (the host went away), a fatal start error or an integrity failure: leave now, even if
    # env code started non-daemon threads that would otherwise keep this process alive.
    os._exit(code)
