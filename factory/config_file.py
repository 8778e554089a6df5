"""Reading a user's TOML config file (``factory train --config``, ``factory run --config``) with one-line errors."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any


def read_toml(path: str | Path, error: type[Exception], flag: str = "--config") -> dict[str, Any]:
    """The file's table; every way it can be unreadable raises ``error`` with one line naming ``flag`` and the path."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{flag} {path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{flag} {path}: is a folder; pass a .toml file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{flag} {path}: cannot read it ({type(exc).__name__})") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{flag} {path}: not valid TOML ({exc})") from None
