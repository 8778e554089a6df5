"""Splitting JSON Lines text into its records.

``str.splitlines`` is the wrong tool: it also breaks on U+2028, U+2029, U+0085 and the ASCII separators
\\x1c-\\x1e, which JSON (and pydantic's ``model_dump_json``) leaves unescaped inside strings, so one record
holding such a character in a message would read back as two broken lines. JSON Lines ends records at
``\\n`` only; a ``\\r`` before it is whitespace to the JSON parser.
"""

from __future__ import annotations


def jsonl_lines(text: str) -> list[str]:
    """The file's lines as JSON Lines defines them (blank ones included, so line numbers stay right)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines
