"""A small stateful MCP server (stdio, or Streamable HTTP with --http PORT): one shopping list in memory.

    python shopping_list_server.py [--reset-tool] [--state-tool] [--http PORT]

``add_item`` and ``remove_item`` change the list and ``list_items`` reads it. Without ``--reset-tool`` the
server has no way to forget an episode: the next one finds the list as the last one left it. With
``--state-tool``, ``dump_state`` returns the whole world as JSON, for checks on the state.
"""

from __future__ import annotations

import argparse
import os

from mcp.server.mcpserver import MCPServer

parser = argparse.ArgumentParser()
parser.add_argument("--reset-tool", action="store_true")
parser.add_argument("--state-tool", action="store_true")
parser.add_argument("--http", type=int, default=None)
options = parser.parse_args()

server = MCPServer("shopping-list")
ITEMS: list[str] = []


@server.tool()
def add_item(item: str) -> str:
    """Put an item on the shopping list."""
    if item in ITEMS:
        raise ValueError(f"{item} is already on the list")
    ITEMS.append(item)
    return f"added {item}"


@server.tool()
def remove_item(item: str) -> str:
    """Take an item off the shopping list."""
    if item not in ITEMS:
        raise ValueError(f"{item} is not on the list")
    ITEMS.remove(item)
    return f"removed {item}"


@server.tool()
def list_items() -> str:
    """The shopping list, and which server process holds it."""
    return f"items={sorted(ITEMS)} pid={os.getpid()}"


if options.reset_tool:

    @server.tool()
    def reset_world() -> str:
        """Bookkeeping: an empty list."""
        ITEMS.clear()
        return "ok"


if options.state_tool:

    @server.tool()
    def dump_state() -> dict:
        """Bookkeeping: the whole world."""
        return {"items": sorted(ITEMS)}


if __name__ == "__main__":
    if options.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        server.run()
