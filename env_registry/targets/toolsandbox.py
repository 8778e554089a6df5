"""Apple's ToolSandbox as a live target: its scenarios as tasks, its world and evaluator in a worker process.

ToolSandbox is not on PyPI; install it from its repository into the environment that runs the product
(README: "ToolSandbox"). Nothing here imports it: ``toolsandbox_worker.py`` does, in a child process started
with this interpreter (or with ``--server "PYTHON WORKER"``, e.g. ToolSandbox's own virtual environment),
and speaks JSON lines with :class:`SandboxWorker`. The worker is one process per runner, so episodes run in
parallel, and a worker that dies or hangs ends one episode as an infrastructure error.

Scenarios: the 129 base ones by default (names without the distraction, scrambled or all-tools
augmentations); an augmented name in ``--task-ids`` makes the worker build all of them, as ToolSandbox's CLI
does. Scenarios whose tools call RapidAPI over the network are skipped, and counted, unless
``RAPID_API_KEY`` is set. The episode's reward is ToolSandbox's own similarity (milestone similarity, zeroed
when a minefield is hit); an episode is a success when it is perfect (similarity 1).
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from env_registry.targets.errors import TargetConfigError, TargetDiedError, TargetProtocolError, TargetStartError, TargetTimeoutError
from env_registry.targets.tasks import Task, UserScenario, select_tasks

TARGET = "toolsandbox"
WORKER_FILE = Path(__file__).with_name("toolsandbox_worker.py")
AUGMENTED = re.compile(r"distraction_tools|scrambled|all_tools")
START_TIMEOUT_S = 120.0
MAX_REPLY_BYTES = 32 * 1024 * 1024
INSTALL_HINT = (
    "install Apple's ToolSandbox from its repository into this environment (Python 3.9-3.12; see README, "
    "'ToolSandbox'), or pass --server \"PYTHON_WITH_TOOLSANDBOX toolsandbox_worker.py\""
)


def default_command() -> list[str]:
    return [sys.executable, str(WORKER_FILE)]


class SandboxWorker:
    """One ToolSandbox worker process: ``request(op, ...)`` sends a line and waits for its answer."""

    def __init__(self, command: list[str] | None = None, *, call_timeout_s: float = 60.0) -> None:
        self.command = list(command or default_command())
        self.call_timeout_s = call_timeout_s
        self._buffer = b""
        try:
            self.process = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
        except OSError as exc:
            raise TargetStartError(f"cannot start the ToolSandbox worker {self.command[0]!r}: {exc.strerror or exc}") from None
        self._stderr: list[bytes] = []
        self._drain = threading.Thread(target=self._read_stderr, daemon=True, name="toolsandbox-stderr")
        self._drain.start()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr = (self._stderr + [line])[-20:]  # ToolSandbox's progress output; kept only for error messages

    def stderr_tail(self) -> str:
        text = b"".join(self._stderr).decode("utf-8", errors="replace").strip().splitlines()
        return text[-1][:300] if text else ""

    def request(self, op: str, timeout_s: float | None = None, **fields: Any) -> dict[str, Any]:
        """Send one request; raises ``TargetInfraError`` subclasses when the worker fails, never anything else."""
        if self.process.poll() is not None:
            raise TargetDiedError(f"the ToolSandbox worker exited ({self.process.returncode}): {self.stderr_tail()}")
        try:
            assert self.process.stdin is not None
            self.process.stdin.write((json.dumps({"op": op, **fields}) + "\n").encode("utf-8"))
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise TargetDiedError(f"the ToolSandbox worker exited: {self.stderr_tail()}") from None
        line = self._read_line(timeout_s or self.call_timeout_s, op)
        try:
            reply = json.loads(line)
        except ValueError:
            raise TargetProtocolError(f"the ToolSandbox worker answered {op!r} with something that is not JSON") from None
        if not isinstance(reply, dict):
            raise TargetProtocolError(f"the ToolSandbox worker answered {op!r} with a JSON {type(reply).__name__}")
        if reply.get("fatal"):
            raise TargetConfigError(f"{reply.get('error')}; {INSTALL_HINT}")
        if not reply.get("ok"):
            raise TargetProtocolError(f"ToolSandbox failed on {op!r}: {reply.get('error')}")
        return reply

    def _read_line(self, timeout_s: float, op: str) -> bytes:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.close()
                    raise TargetTimeoutError(f"ToolSandbox took longer than {timeout_s:g}s on {op!r}; the worker was stopped")
                if not selector.select(left):
                    continue
                chunk = os.read(self.process.stdout.fileno(), 1 << 16)
                if not chunk:
                    self.process.wait(timeout=5)
                    raise TargetDiedError(f"the ToolSandbox worker exited ({self.process.returncode}) during {op!r}: {self.stderr_tail()}")
                self._buffer += chunk
                if len(self._buffer) > MAX_REPLY_BYTES:
                    self.close()
                    raise TargetProtocolError(f"the ToolSandbox worker's answer to {op!r} is over {MAX_REPLY_BYTES} bytes")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=5)


ACTIVE_RUNNER = threading.local()
"""``.runner``: the ToolSandbox runner whose episode this thread is running (set by ``toolsandbox_runner``; kept
here, below it, so a task can find its runner without this module importing the runner's)."""


def active_runner() -> Any:
    """The runner whose episode this thread is running (policies ask it for the reference agent's turn)."""
    return getattr(ACTIVE_RUNNER, "runner", None)


class ToolSandboxTask(Task):
    """A ToolSandbox scenario as a task. ``reference_turn()`` asks the episode running it on this thread for
    the reference agent's next turn (``scripted:gold``): ToolSandbox defines milestones, not a fixed script,
    so the reference is worked out against the live state, in the worker."""

    def reference_turn(self) -> Any:
        runner = active_runner()
        if runner is None or runner.task is None or runner.task.id != self.id:
            raise TargetConfigError(f"scenario {self.id}: the reference agent needs its episode running on this thread")
        return runner.reference_action()


class Listing:
    """What a worker reports once: its package version, the scenarios as tasks, and the RapidAPI skips."""

    def __init__(self, reply: dict[str, Any]) -> None:
        self.package = str(reply.get("package") or "tool_sandbox")
        self.rapid_api = bool(reply.get("rapid_api_key"))
        self.tasks: list[ToolSandboxTask] = []
        self.needs_network: dict[str, list[str]] = {}
        for item in reply.get("scenarios") or []:
            task = ToolSandboxTask(
                id=str(item["name"]),
                description={k: item.get(k) for k in ("first_message", "categories", "tools", "milestones", "minefields", "max_messages")},
                user_scenario=UserScenario(instructions=str(item.get("user_task") or "")),
                augmented=bool(item.get("augmented")),
            )
            task._version = str(item.get("version") or "")
            self.tasks.append(task)
            if item.get("rapid_api_tools"):
                self.needs_network[task.id] = list(item["rapid_api_tools"])


_LISTINGS: dict[tuple[tuple[str, ...], bool], Listing] = {}
_LISTINGS_LOCK = threading.Lock()


def listing(command: list[str] | None, include_augmented: bool) -> Listing:
    """The scenarios a worker command serves (asked once per process and command)."""
    key = (tuple(command or default_command()), include_augmented)
    with _LISTINGS_LOCK:
        if key not in _LISTINGS:
            worker = SandboxWorker(list(key[0]))
            try:
                _LISTINGS[key] = Listing(worker.request("hello", timeout_s=START_TIMEOUT_S, include_augmented=include_augmented))
            finally:
                worker.close()
        return _LISTINGS[key]


def skip_reason(found: Listing) -> str:
    return "need RapidAPI over the network (set RAPID_API_KEY to run them)"


def runnable_tasks(command: list[str] | None, task_ids: list[str] | None = None) -> tuple[list[Task], dict[str, int]]:
    """The tasks to run and the skipped ones counted by reason: by default every base scenario that runs
    offline; with ``task_ids``, exactly those (an augmented id loads the augmented scenarios too)."""
    wanted = list(task_ids or [])
    found = listing(command, any(AUGMENTED.search(t) for t in wanted))
    offline_only = not found.rapid_api
    if wanted:
        blocked = [t for t in wanted if offline_only and t in found.needs_network]
        if blocked:
            raise TargetConfigError(f"scenario(s) {', '.join(blocked)} {skip_reason(found)}")
        return list(select_tasks(list(found.tasks), wanted)), {}
    base = [t for t in found.tasks if not getattr(t, "augmented", False)]
    kept = [t for t in base if not (offline_only and t.id in found.needs_network)]
    skipped = len(base) - len(kept)
    return list(kept), ({skip_reason(found): skipped} if skipped else {})


def describe(command: list[str] | None) -> str:
    found = _LISTINGS.get((tuple(command or default_command()), False)) or _LISTINGS.get((tuple(command or default_command()), True))
    return found.package if found else "tool_sandbox"
