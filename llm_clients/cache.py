"""On-disk response cache, so a rerun of an analysis (or a crashed one) costs nothing.

Entries are JSON files named by the SHA-256 of the request: provider, model, endpoint (for self-hosted
servers), system prompt, messages and sampling parameters. Writes go to a temporary file in the same
folder and are renamed into place, so concurrent writers and crashes never leave a half-written entry;
an unreadable entry is treated as a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llm_clients.types import LLMResponse

CACHE_ENV = "TRACE_FACTORY_CACHE"


def default_cache_dir() -> Path:
    """``$TRACE_FACTORY_CACHE/llm`` if set, else ``~/.cache/trace-factory/llm``."""
    root = os.environ.get(CACHE_ENV)
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "trace-factory"
    return base / "llm"


def request_key(material: dict[str, Any]) -> str:
    """Stable hash of a request; key order and whitespace do not matter."""
    blob = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """A folder of ``<key[:2]>/<key>.json`` entries."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> LLMResponse | None:
        path = self._path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return LLMResponse.model_validate(data["response"])
        except (OSError, ValueError, KeyError, TypeError, ValidationError):
            return None

    def put(self, key: str, response: LLMResponse, material: dict[str, Any] | None = None) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"key": key, "response": response.model_dump(mode="json")}
        if material is not None:
            entry["request"] = {k: material[k] for k in ("provider", "model") if k in material}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(entry, handle, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
