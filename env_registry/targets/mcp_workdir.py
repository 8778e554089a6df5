"""The files an MCP server keeps between episodes: restored where declared, noticed where not. Host side.

A server that keeps its world in files (a JSON file, an SQLite database) keeps it across a process restart,
so restarting it is no reset. Where its folder is declared (``MCPServerSpec.workdir``) the folder is copied
when the backend starts (:class:`WorkdirSnapshot`) and put back before every episode, the server stopped.
Where it is not, the folder the server runs in is fingerprinted (:func:`fingerprint`: sizes and mtimes, two
levels deep, bounded) at each start and compared before the restart, so a server that wrote files there is
refused in one line instead of leaking its state into the next episode.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

FINGERPRINT_DEPTH = 2
"""``state.json`` and ``data/app.db`` are seen; a trainer's ``runs/<name>/metrics.jsonl`` beside them is not."""
FINGERPRINT_LIMIT = 5000
"""A folder with more entries than this is not watched (a home folder): the scan must stay a few milliseconds."""
_SKIPPED = {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".venv", "node_modules"}

Fingerprint = dict[str, tuple[int, int]]


class WorkdirSnapshot:
    """A copy of ``folder`` taken now, which :meth:`restore` puts back in place (files added since removed)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._holder = Path(tempfile.mkdtemp(prefix="trace-mcp-workdir-"))
        self._copy = self._holder / "workdir"
        try:
            shutil.copytree(folder, self._copy, symlinks=True)
        except BaseException:
            shutil.rmtree(self._holder, ignore_errors=True)
            raise

    def restore(self, into: Path | None = None) -> Path:
        """The snapshot written over ``into`` (the declared folder by default), which is emptied first."""
        target = into or self.folder
        target.mkdir(parents=True, exist_ok=True)
        for child in list(target.iterdir()):
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        shutil.copytree(self._copy, target, symlinks=True, dirs_exist_ok=True)
        return target

    def close(self) -> None:
        shutil.rmtree(self._holder, ignore_errors=True)


def fingerprint(folder: Path) -> Fingerprint | None:
    """(size, mtime) of the regular files in ``folder`` down to :data:`FINGERPRINT_DEPTH`; None if too big."""
    found: Fingerprint = {}
    pending = [(folder, 1)]
    entries = 0
    while pending:
        current, depth = pending.pop()
        try:
            with os.scandir(current) as listing:
                for entry in listing:
                    entries += 1
                    if entries > FINGERPRINT_LIMIT:
                        return None
                    if entry.name in _SKIPPED:
                        continue
                    try:
                        if entry.is_file(follow_symlinks=False):
                            stat = entry.stat(follow_symlinks=False)
                            found[os.path.relpath(entry.path, folder)] = (stat.st_size, stat.st_mtime_ns)
                        elif entry.is_dir(follow_symlinks=False) and depth < FINGERPRINT_DEPTH:
                            pending.append((Path(entry.path), depth + 1))
                    except OSError:
                        continue
        except OSError:
            continue
    return found


def changed(before: Fingerprint | None, after: Fingerprint | None) -> list[str]:
    """Files created, changed or removed between two fingerprints (none where either folder was not watched)."""
    if before is None or after is None:
        return []
    return sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))
