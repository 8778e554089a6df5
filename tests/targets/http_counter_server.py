"""A small MCP server over Streamable HTTP, built with the mcp SDK, for the URL path of the generic target.

    python http_counter_server.py PORT

A counter per ``state_key`` (the bookkeeping convention of the τ² servers): ``add``, ``total``, and the
bookkeeping tool ``reset_state``.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("counter")
COUNTS: dict[str, int] = {}


@server.tool()
def add(amount: int, state_key: str | None = None) -> str:
    """Add an amount to the counter."""
    COUNTS[state_key or ""] = COUNTS.get(state_key or "", 0) + amount
    return f"total is {COUNTS[state_key or '']}"


@server.tool()
def total(state_key: str | None = None) -> str:
    """Read the counter."""
    return f"total is {COUNTS.get(state_key or '', 0)}"


@server.tool()
def reset_state(state_key: str | None = None) -> str:
    """Bookkeeping: a fresh counter for this key."""
    COUNTS[state_key or ""] = 0
    return "ok"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
