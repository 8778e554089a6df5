"""Whatever a worker sends, the host ends in a WorkerFailure with a clear message, never another exception.

The worker here is a scripted :class:`Channel` that answers each request with hostile bytes, so every reply
the red-team pass found (deep nesting, lone surrogates, invalid UTF-8, huge lines, integers with a million
digits, unsolicited floods) is replayed exactly against the real host-side client (:mod:`sandbox.client`).
End-to-end versions, with the bytes produced by env code inside real sandboxes, are in test_integrity.py.
"""

from __future__ import annotations

import json
import threading
from typing import Callable

import pytest

from sandbox import WorkerBadReply, WorkerCrashed, WorkerError, WorkerFailure
from sandbox.client import Channel, Worker
from sandbox.replies import LineSplitter, clean
from schemas.wire import check_reply

READY = b'{"id": null, "event": "ready", "pid": 1, "methods": ["m"]}\n'


class ScriptedChannel(Channel):
    """Answers each request with ``reply(request_id)`` (bytes for stdout) and optional stderr bytes."""

    def __init__(self, reply: Callable[[int], bytes], stderr: bytes = b"", chunk: int = 1 << 16) -> None:
        super().__init__()
        self.reply, self.stderr, self.chunk = reply, stderr, chunk
        self.killed = threading.Event()

    def start(self) -> None:
        self.on_stdout(READY)

    def write(self, data: bytes) -> None:
        req = json.loads(data)
        if self.stderr:
            for i in range(0, len(self.stderr), self.chunk):
                if self.killed.is_set():
                    return
                self.on_stderr(self.stderr[i:i + self.chunk])
        out = self.reply(req["id"])
        for i in range(0, len(out), self.chunk):
            if self.killed.is_set():
                return
            self.on_stdout(out[i:i + self.chunk])

    def kill(self) -> None:
        if not self.killed.is_set():
            self.killed.set()
            self.on_eof()

    def exit_code(self, wait_s: float = 0.0) -> int | None:
        return -9 if self.killed.is_set() else None


def worker(reply: Callable[[int], bytes], stderr: bytes = b"", **kw) -> Worker:  # type: ignore[no-untyped-def]
    w = Worker(lambda: ScriptedChannel(reply, stderr), name="hostile", startup_timeout_s=5, **kw)
    w.start()
    return w


def ok(body: bytes) -> Callable[[int], bytes]:
    return lambda rid: b'{"id": %d, "result": ' % rid + body + b"}\n"


HOSTILE = {
    "deeply nested": (ok(b"[" * 100_000 + b"]" * 100_000), WorkerCrashed, "nested"),
    "nested past the host's bound": (ok(b"[" * 150 + b"]" * 150), WorkerCrashed, "more than 100 levels"),
    "not JSON": (lambda rid: b"hello there\n", WorkerCrashed, "not JSON"),
    "invalid UTF-8": (lambda rid: b'{"id": %d, "result": "\xff\xfe"}\n' % rid, WorkerCrashed, "UTF-8"),
    "a million digits": (ok(b"9" * 1_000_000), WorkerCrashed, "not JSON"),
    "over the size cap": (ok(b'"' + b"a" * (3 << 20) + b'"'), WorkerCrashed, "over 2097152 bytes"),
    "a JSON list, not a message": (lambda rid: b"[1, 2]\n", WorkerCrashed, "list where a message"),
    "stray lines flood": (lambda rid: b'{"id": 7, "result": 1}\n' * 200_000, WorkerCrashed, "nobody asked for"),
    "error of the wrong shape": (lambda rid: b'{"id": %d, "error": [1, {"x": 2}]}\n' % rid, WorkerError, "Error"),
    "fatal integrity error": (lambda rid: b'{"id": %d, "error": {"type": "IntegrityError", "message": "json.dumps was replaced", "fatal": true}}\n' % rid,
                              WorkerCrashed, "json.dumps was replaced"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_reply_is_a_worker_failure_with_a_clear_message(case: str) -> None:
    reply, kind, words = HOSTILE[case]
    w = worker(reply, max_reply_bytes=2 << 20, unsolicited_budget=1 << 20)
    with pytest.raises(kind) as caught:
        w.call("m", {}, timeout_s=20)
    assert isinstance(caught.value, WorkerFailure)
    first_line = str(caught.value).splitlines()[0]
    assert words in first_line and len(first_line) < 400, first_line


def test_stderr_flood_kills_the_worker_at_its_budget() -> None:
    w = worker(ok(b"1"), stderr=b"x" * (3 << 20), unsolicited_budget=1 << 20)
    with pytest.raises(WorkerCrashed, match="more than 1048576 bytes of output on stderr"):
        w.call("m", {})
    assert not w.alive


def test_output_within_budget_is_fine_and_the_budget_is_per_call() -> None:
    w = worker(ok(b"1"), stderr=b"y" * (600 << 10), unsolicited_budget=1 << 20)
    assert [w.call("m", {}) for _ in range(3)] == [1, 1, 1]  # 600 KiB each call, 1.8 MiB in all


def test_a_line_written_ahead_cannot_answer_a_call() -> None:
    """Ids are random: a forged answer for the 'next' id is skipped as stray, the real one is returned."""
    forged = b"".join(b'{"id": %d, "result": "forged"}\n' % i for i in range(1, 50))
    w = worker(lambda rid: forged + b'{"id": %d, "result": "real"}\n' % rid)
    assert w.call("m", {}) == "real"


def test_lone_surrogates_come_out_encodable() -> None:
    w = worker(ok(b'{"text": "a\\ud800b", "\\udfffkey": ["\\ud83d"]}'))
    result = w.call("m", {})
    json.dumps(result, ensure_ascii=False).encode("utf-8")  # would raise on a lone surrogate
    assert result["text"] == "a\ufffdb" and "\ufffdkey" in result


def test_reading_is_linear_in_the_size_of_a_reply() -> None:
    """A 16 MiB line in 4 KiB chunks: the splitter looks at each byte once (the old reader rescanned the
    whole pending buffer on every chunk: 4096 x 8 MiB on average)."""
    splitter = LineSplitter(32 << 20)
    calls = []
    real_find = bytes.find

    class Counting(bytes):
        def find(self, sub, start=0):  # type: ignore[override]
            calls.append(len(self) - start)
            return real_find(self, sub, start)

    body = b"a" * (16 << 20)
    lines = []
    for i in range(0, len(body), 4096):
        lines += splitter.feed(Counting(body[i:i + 4096]))
    lines += splitter.feed(Counting(b"\n"))
    assert lines == [body]
    assert sum(calls) <= len(body) + 1


def test_clean_bounds_depth_without_recursion() -> None:
    deep: list = []
    node = deep
    for _ in range(5000):
        node.append([])
        node = node[0]
    with pytest.raises(ValueError, match="more than 100 levels"):
        clean(deep)
    assert clean({"a": [{"b": "c"}]}) == {"a": [{"b": "c"}]}


@pytest.mark.parametrize(
    ("method", "result", "words"),
    [
        ("episode", {"seed": 1, "scenario_hash": "h", "reward": "1.0", "reward_detail": {}, "steps": 1, "env_errors": []}, "reward"),
        ("episode", {"seed": 1, "scenario_hash": "h", "reward": {"total": 1}, "reward_detail": {}, "steps": 1, "env_errors": []}, "reward"),
        ("episode", {"seed": 1, "scenario_hash": "h", "reward": float("nan"), "reward_detail": {}, "steps": 1, "env_errors": []}, "finite"),
        ("episode", {"seed": 1, "scenario_hash": "h", "reward": 1.0, "reward_detail": {}, "steps": 1, "env_errors": "none"}, "env_errors"),
        ("step", {"observation": "o", "reward": 0.0, "terminated": "yes", "truncated": False, "info": {}}, "terminated"),
        ("generate", {"fingerprint": 12, "truth": {}}, "fingerprint"),
        ("solution", {"not": "a list"}, "turns"),
        ("load", ["capability"], "must be an object"),
    ],
)
def test_reply_shapes_are_checked(method: str, result: object, words: str) -> None:
    with pytest.raises(ValueError, match=words) as caught:
        check_reply(method, result)
    assert str(caught.value).startswith(f"the reply to {method!r}")


def test_bad_shape_surfaces_as_worker_bad_reply() -> None:
    from env_registry.hosted import SandboxedEnv

    env = SandboxedEnv.__new__(SandboxedEnv)
    env.rpc_timeout_s = 5
    env.worker = worker(ok(b'{"seed": 1, "scenario_hash": "h", "reward": "high", "reward_detail": {}, "steps": 1, "env_errors": []}'))
    with pytest.raises(WorkerBadReply, match="reward"):
        env.call("episode", {})
    assert env.worker.alive  # a malformed answer fails that call; the worker itself is still usable
