"""Paths a command reads or writes: checked before long work starts, and every failure as one line.

A build that runs the 9-second gate and then finds its registry read-only has wasted the user's time and,
worse, lost the verdict. So commands call :func:`preflight_folder` / :func:`preflight_file` on everything they
will write before they start, and write results with :func:`write_atomic` (a failed write never leaves half a
file). User files are read with :func:`schemas.files.read_text`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from schemas import files
from schemas.files import write_atomic  # noqa: F401 - its home is schemas.files (the trainer writes with it too)

MIN_FREE_BYTES = 1 << 20
"""Less free space than this on a path a command writes to fails the preflight: nothing it writes fits."""


class PathProblem(ValueError):
    """A path cannot be used as asked; the message is the one line the user sees."""


def _nearest_existing(path: Path) -> Path:
    current = path
    while not os.path.lexists(current) and current != current.parent:
        current = current.parent
    return current


def _probe_writable(path: Path, folder: Path, what: str, fix: str) -> None:
    """Create and delete a file in ``folder`` (``path`` or its nearest existing parent): the one test that sees
    permissions, read-only mounts and quotas alike; then check the free space."""
    where = f"{what} {path}" if folder == path else f"{what} {path} ({folder} is the nearest existing folder)"
    try:
        fd, name = tempfile.mkstemp(prefix=".trace-factory-probe-", dir=folder)
    except OSError as exc:
        raise PathProblem(f"cannot write {where}: {files.reason(exc)}; {fix}") from None
    os.close(fd)
    os.unlink(name)
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if free < MIN_FREE_BYTES:
        raise PathProblem(f"cannot write {where}: only {free:,} bytes free on its device; free some space or {fix}")


def preflight_folder(path: Path, what: str, fix: str) -> None:
    """Fail now if ``path`` (a folder this command will create or write into) cannot be written.

    Nothing is created: a missing folder is checked by writing a probe into its nearest existing parent.
    ``what`` names the folder ("registry"), ``fix`` says how to choose another ("pass --registry DIR").
    """
    path = Path(path).expanduser()
    existing = _nearest_existing(path)
    if not existing.is_dir():
        kind = "a file" if existing.is_file() else "not a folder"
        where = "it" if existing == path else f"{existing} on its way"
        raise PathProblem(f"cannot use {what} {path}: {where} is {kind}; {fix}")
    _check_lengths(path, existing, what, fix)
    _probe_writable(path, existing, what, fix)


def _check_lengths(path: Path, existing: Path, what: str, fix: str) -> None:
    """The parts still to be created must fit the file system's name limit (255 bytes on most), or the command
    would fail at its first write, after the work: said now instead."""
    try:
        limit = os.pathconf(existing, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    for part in path.relative_to(existing).parts if existing != path else ():
        size = len(os.fsencode(part))
        if size > limit:
            shown = part if len(part) <= 40 else f"{part[:37]}..."
            raise PathProblem(f"cannot use {what}: the name {shown!r} is {size} bytes, over the file system's {limit}-byte limit; {fix}")


def preflight_file(path: Path, what: str, fix: str) -> None:
    """Fail now if the file ``path`` cannot be (re)written: a folder in its place, or an unwritable parent."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise PathProblem(f"cannot write {what} {path}: it is a folder; pass a file name")
    if os.path.lexists(path) and not path.is_file():
        raise PathProblem(f"cannot write {what} {path}: it is not a regular file; {fix}")
    preflight_folder(path.parent, f"the folder of {what}", fix)
