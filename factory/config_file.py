"""Reading a user's TOML config file (``factory train --config``, ``factory run --config``) with one-line errors."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

MAX_CONFIG_BYTES = 1024 * 1024


def read_toml(path: str | Path, error: type[Exception], flag: str = "--config") -> dict[str, Any]:
    """The file's table, read with the project's reader for user-named files (a FIFO, a folder, a huge or
    non-UTF-8 file is refused, never waited on); any problem raises ``error`` with one line naming ``flag``."""
    from env_registry.files import InputFileError, read_text  # here: importing env_registry registers envs

    what = f"{flag} {path}"
    try:
        text = read_text(path, what, "a TOML config file", limit=MAX_CONFIG_BYTES)
    except InputFileError as exc:
        raise error(str(exc)) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{what}: not valid TOML ({exc})") from None
