"""A scripted LLM server on 127.0.0.1 for tests: OpenAI ``/v1/chat/completions`` and Anthropic ``/v1/messages``.

Tests drive the real ``openai`` and ``anthropic`` SDKs against it, so request building, response parsing,
status handling and timeouts are exercised end to end without a network or an API key. Replies are either
a list consumed in order or a function of the request; every request is recorded.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ScriptedReply:
    """One answer: a completion ``text`` (status 200) or an error ``status``; ``delay_s`` stalls it first."""

    text: str = ""
    status: int = 200
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass
class RecordedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]

    def prompt_text(self) -> str:
        """All message text of the request (system included), for handlers that answer by content."""
        parts = []
        system = self.body.get("system")
        if isinstance(system, str):
            parts.append(system)
        elif isinstance(system, list):
            parts += [b.get("text", "") for b in system if isinstance(b, dict)]
        for message in self.body.get("messages", []):
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts += [b.get("text", "") for b in content if isinstance(b, dict)]
        return "\n".join(parts)


Script = list[ScriptedReply | str] | Callable[[RecordedRequest], ScriptedReply | str]


class ScriptedLLMServer:
    """``with ScriptedLLMServer([...]) as server: OpenAI(base_url=server.openai_base_url, ...)``."""

    def __init__(self, script: Script | None = None, model: str = "scripted-model") -> None:
        self.model = model
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests handled at once (checks a client's concurrency limit)
        self._script = script if script is not None else []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> "ScriptedLLMServer":
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                owner._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "ScriptedLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- handling -------------------------------------------------------------------------------
    def _next_reply(self, request: RecordedRequest) -> ScriptedReply:
        with self._lock:
            self.requests.append(request)
            if callable(self._script):
                try:
                    reply = self._script(request)
                except Exception as exc:  # a broken script answers 400 (not retried) and says why
                    reply = ScriptedReply(status=400, text=f"script error: {type(exc).__name__}: {exc}")
            elif self._script:
                reply = self._script.pop(0)
            else:
                reply = ScriptedReply(status=500, text="script exhausted")
        return ScriptedReply(text=reply) if isinstance(reply, str) else reply

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self._respond(handler)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _respond(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        request = RecordedRequest(path=handler.path, body=body, headers={k.lower(): v for k, v in handler.headers.items()})
        reply = self._next_reply(request)
        if reply.delay_s:
            time.sleep(reply.delay_s)
        anthropic = handler.path.rstrip("/").endswith("/messages")
        payload = self._payload(request, reply, anthropic)
        data = json.dumps(payload).encode("utf-8")
        try:
            handler.send_response(reply.status)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            for key, value in reply.headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            pass

    def _payload(self, request: RecordedRequest, reply: ScriptedReply, anthropic: bool) -> dict[str, Any]:
        model = request.body.get("model") or self.model
        if reply.status >= 400:
            kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(reply.status, "api_error")
            if anthropic:
                return {"type": "error", "error": {"type": kind, "message": reply.text or f"scripted {reply.status}"}}
            return {"error": {"message": reply.text or f"scripted {reply.status}", "type": kind, "code": None}}
        in_tokens = reply.input_tokens if reply.input_tokens is not None else max(1, len(request.prompt_text()) // 4)
        out_tokens = reply.output_tokens if reply.output_tokens is not None else max(1, len(reply.text) // 4)
        if anthropic:
            return {
                "id": f"msg_{uuid.uuid4().hex[:12]}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": reply.text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": in_tokens, "output_tokens": out_tokens},
            }
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": in_tokens, "completion_tokens": out_tokens, "total_tokens": in_tokens + out_tokens},
        }
