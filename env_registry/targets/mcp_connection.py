"""The sync face of one MCP client session: an anyio blocking portal runs the ``mcp`` SDK's async client in
its own event-loop thread, so a gym env calls tools with a plain function call.

Every failure becomes a :class:`TargetInfraError` that says what happened: the server did not start (with
the tail of its stderr), died, did not answer in time, or answered something that is not the protocol.
The SDK logs protocol faults (an unparsable line) with a traceback; they are kept here as data instead,
per event-loop thread, and quoted in the error.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import os
import tempfile
import threading
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from env_registry.targets.errors import (
    TargetDiedError,
    TargetInfraError,
    TargetProtocolError,
    TargetStartError,
    TargetTimeoutError,
)
from schemas.errors import one_line

STDERR_TAIL_CHARS = 600


class MCPServerSpec(BaseModel):
    """How to reach one MCP server and which of its tools and parameters are bookkeeping."""

    command: list[str] | None = Field(default=None, description="argv of a stdio server")
    url: str | None = Field(default=None, description="Streamable HTTP endpoint of a running server")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment for a stdio server")
    inherit_env: list[str] = Field(
        default_factory=list,
        description="names of variables a stdio server takes from the caller's environment (an API key, a config path); "
        "the SDK otherwise passes only HOME, PATH, SHELL, TERM, USER and LOGNAME",
    )
    workdir: str | None = Field(
        default=None,
        description="the folder a stdio server keeps its files or database in: it runs there, the folder is copied "
        "when the backend starts, and put back as it was (and the server restarted) before every episode",
    )
    state_dir_env: str | None = Field(
        default=None, description="environment variable naming the folder where the server persists per-key state files"
    )
    hidden_tools: list[str] = Field(default_factory=lambda: ["reset_state", "get_call_log"])
    state_param: str = "state_key"
    reset: Literal["auto", "tool", "restart", "none"] = Field(
        default="auto",
        description="how each episode gets a fresh world: tool (call reset_tool), restart (a new stdio server "
        "process), none (the server keeps its state: one episode per server unless allow_shared_state); "
        "auto: tool when the server lists reset_tool, else restart for a command, else none",
    )
    reset_tool: str = Field(default="reset_state", description="the server's reset tool (hidden from the agent)")
    allow_shared_state: bool = Field(
        default=False, description="run more than one episode on a server that cannot be reset (each sees the last one's world)"
    )
    state_tool: str | None = Field(
        default=None, description="a tool that returns the world's state as JSON (hidden from the agent): the task's DB check reads it"
    )
    envelope: Literal["auto", "tau2", "text"] = Field(
        default="auto", description="tau2: results carry tau2_tool_message {content, error}; text: the text content as is"
    )
    start_timeout_s: float = Field(default=30.0, gt=0)
    call_timeout_s: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _one_way_in(self) -> "MCPServerSpec":
        if bool(self.command) == bool(self.url):
            raise ValueError("give exactly one of command (a stdio server) or url (a Streamable HTTP server)")
        if self.reset == "restart" and not self.command:
            raise ValueError("reset 'restart' needs a stdio server (a command); a server reached by URL cannot be restarted")
        if self.workdir and not self.command:
            raise ValueError("workdir needs a stdio server (a command): a server reached by URL cannot be restarted on a restored folder")
        return self

    def describe(self) -> str:
        """The server in a few words for messages: the command's program name and arguments, or the URL."""
        if not self.command:
            return str(self.url)
        text = " ".join([os.path.basename(self.command[0]), *self.command[1:]])
        return text if len(text) <= 100 else text[:97] + "..."


# --- the mcp SDK logs protocol faults (e.g. an unparsable line) with a traceback; keep them as data ---------
class _FaultLog(logging.Handler):
    """Collects the SDK's warnings per event-loop thread, so each connection reports its own faults."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.by_thread: dict[int, collections.deque[str]] = collections.defaultdict(lambda: collections.deque(maxlen=5))

    def emit(self, record: logging.LogRecord) -> None:
        self.by_thread[record.thread or 0].append(record.getMessage())


_FAULTS = _FaultLog()
_FAULTS_LOCK = threading.Lock()


def _capture_sdk_logs() -> None:
    with _FAULTS_LOCK:
        logger = logging.getLogger("mcp")
        if _FAULTS not in logger.handlers:
            logger.addHandler(_FAULTS)
            logger.propagate = False


def _flatten(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class MCPConnection:
    """One client session to one server, driven from sync code. Not thread-safe: one caller at a time."""

    def __init__(self, spec: MCPServerSpec, env: dict[str, str] | None = None) -> None:
        from anyio.from_thread import start_blocking_portal

        _capture_sdk_logs()
        self.spec = spec
        self._env = {**{name: os.environ[name] for name in spec.inherit_env if name in os.environ}, **spec.env, **(env or {})}
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._loop_thread = self._portal.call(threading.get_ident)
        _FAULTS.by_thread.pop(self._loop_thread, None)  # a thread id can be reused by a later loop
        self._closing: Any = None
        self._future: Any = None
        self.client: Any = None
        self.dead: str | None = None
        started: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            self._future = self._portal.start_task_soon(self._serve, started)
            self.client = started.result(timeout=spec.start_timeout_s)
        except BaseException as exc:
            if isinstance(exc, concurrent.futures.TimeoutError):
                exc = TimeoutError()
            error = self._start_error(_flatten(exc))
            self.close()
            raise error from None

    async def _serve(self, started: "concurrent.futures.Future[Any]") -> None:
        """Holds the client session open, in the loop thread, until :meth:`close`."""
        import anyio
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        self._closing = anyio.Event()
        if self.spec.command:
            params = StdioServerParameters(command=self.spec.command[0], args=self.spec.command[1:], env=self._env, cwd=self.spec.workdir)
            transport: Any = stdio_client(params, errlog=self._stderr)
        else:
            transport = str(self.spec.url)
        try:
            async with Client(transport, read_timeout_seconds=self.spec.call_timeout_s) as client:
                started.set_result(client)
                await self._closing.wait()
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise

    # --- diagnostics ---------------------------------------------------------------------------------
    def stderr_tail(self) -> str:
        try:
            self._stderr.flush()
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - STDERR_TAIL_CHARS * 4))
            text = " ".join(self._stderr.read().split())
        except (OSError, ValueError):
            return ""
        return text[-STDERR_TAIL_CHARS:]

    def _faults(self) -> list[str]:
        return list(_FAULTS.by_thread.get(self._loop_thread, ()))

    def _context(self) -> str:
        parts = []
        faults = self._faults()
        if faults:
            parts.append(f"SDK reported: {faults[-1]}")
        tail = self.stderr_tail()
        if tail:
            parts.append(f"server stderr: {tail}")
        return ("; " + "; ".join(parts)) if parts else ""

    def _start_error(self, exc: BaseException) -> TargetStartError:
        if isinstance(exc, TimeoutError):
            why = f"no handshake within {self.spec.start_timeout_s:g}s"
        elif isinstance(exc, FileNotFoundError):
            why = f"command not found ({exc.filename or self.spec.describe()}); is the server installed?"
        elif "closed" in str(exc).lower():
            why = "it exited (or closed its output) before the MCP handshake"
        else:
            why = f"{type(exc).__name__}: {exc}"
        return TargetStartError(f"MCP server `{self.spec.describe()}` failed to start: {why}{self._context()}")

    # --- requests ------------------------------------------------------------------------------------
    def request(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``client.<method>`` and translate every failure into a TargetInfraError (and mark the link dead)."""
        from pydantic import ValidationError

        if self.dead:
            raise TargetDiedError(self.dead)
        _FAULTS.by_thread.pop(self._loop_thread, None)
        try:
            return self._portal.call(lambda: getattr(self.client, method)(*args, **kwargs))
        except BaseException as raw:
            exc = _flatten(raw)
            if isinstance(exc, KeyboardInterrupt):
                raise
            error = self._request_error(method, exc, isinstance(exc, ValidationError))
            self.dead = str(error)
            raise error from None

    def _request_error(self, method: str, exc: BaseException, malformed: bool) -> TargetInfraError:
        text = str(exc)
        where = f"MCP server `{self.spec.describe()}`"
        faults = self._faults()
        if malformed or any("parse" in f.lower() or "validation" in f.lower() for f in faults):
            first = one_line(exc)[:400]  # a pydantic error through the one renderer, not its "1 validation error for X"
            return TargetProtocolError(f"{where} sent a malformed reply to {method} ({first}){self._context()}")
        if "timed out" in text.lower() or isinstance(exc, TimeoutError):
            return TargetTimeoutError(f"{where} did not answer {method} within {self.spec.call_timeout_s:g}s{self._context()}")
        if "closed" in text.lower() or isinstance(exc, (BrokenPipeError, ConnectionError, EOFError)):
            return TargetDiedError(f"{where} died during {method} (connection closed){self._context()}")
        return TargetProtocolError(f"{where} failed {method}: {type(exc).__name__}: {text[:300]}{self._context()}")

    def close(self) -> None:
        if self._portal is None:
            return
        try:
            if self.client is not None and self._closing is not None:
                self._portal.call(self._closing.set)
            elif self._future is not None:
                self._future.cancel()
            if self._future is not None:
                self._future.result(timeout=15)
        except BaseException:  # noqa: BLE001 - a dead server may fail its own shutdown; we only need it gone
            pass
        try:
            self._portal_cm.__exit__(None, None, None)
        except BaseException:  # noqa: BLE001
            pass
        self._portal = None
        self._stderr.close()
