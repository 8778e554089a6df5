"""A stdio MCP server (the SDK's MCPServer, FastMCP before mcp 2) that keeps its world in its working folder.

    python notes_file_server.py [--sqlite]

``add_note`` writes the note to ``notes.json`` (or, with ``--sqlite``, to the SQLite database ``notes.db``)
in the folder the server runs in, and ``list_notes`` reads it back: restarting the process resets nothing.
``whoami`` reports ``NOTES_OWNER`` from the server's environment (``unset`` where the variable did not arrive).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from pathlib import Path

from mcp.server.mcpserver import MCPServer

parser = argparse.ArgumentParser()
parser.add_argument("--sqlite", action="store_true")
options = parser.parse_args()

server = MCPServer("notes-file")
JSON_FILE = Path("notes.json")
DB_FILE = Path("notes.db")


def _notes() -> list[str]:
    if options.sqlite:
        with sqlite3.connect(DB_FILE) as db:
            db.execute("CREATE TABLE IF NOT EXISTS notes (text TEXT)")
            return [row[0] for row in db.execute("SELECT text FROM notes ORDER BY rowid")]
    return json.loads(JSON_FILE.read_text()) if JSON_FILE.exists() else []


@server.tool()
def add_note(text: str) -> str:
    """Keep a note."""
    if options.sqlite:
        with sqlite3.connect(DB_FILE) as db:
            db.execute("CREATE TABLE IF NOT EXISTS notes (text TEXT)")
            db.execute("INSERT INTO notes VALUES (?)", (text,))
    else:
        JSON_FILE.write_text(json.dumps([*_notes(), text]))
    return f"kept {text}"


@server.tool()
def list_notes() -> str:
    """Every note kept."""
    return f"notes={_notes()}"


@server.tool()
def whoami() -> str:
    """Whose notes these are, from the server's environment."""
    return f"owner={os.environ.get('NOTES_OWNER', 'unset')}"


if __name__ == "__main__":
    server.run()
