"""Content digests that decide whether work is still valid: files, folders and JSON-able values.

A folder's digest covers every regular file's relative path and bytes (streamed, so multi-GB adapters
are fine) and nothing else: timestamps and permissions do not change it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from factory.analyze.tasks import canonical_sha256

CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def tree_digest(path: Path, skip: tuple[str, ...] = ()) -> str:
    """sha256 of a file, or of a folder's files (relative path and content, in sorted order). ``skip``
    leaves out entries whose first path part is one of these names (e.g. checkpoints next to an adapter)."""
    path = Path(path)
    if path.is_file():
        return file_sha256(path)
    h = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = item.relative_to(path)
        if rel.parts[0] in skip:
            continue
        h.update(rel.as_posix().encode("utf-8") + b"\0" + bytes.fromhex(file_sha256(item)))
    return h.hexdigest()


def value_digest(value: Any) -> str:
    """sha256 of a JSON-able value's canonical JSON (sorted keys): the same value, the same digest."""
    return canonical_sha256(json.loads(json.dumps(value, default=str)))
