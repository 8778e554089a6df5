"""The registry's folder layout, read from names alone: listing never opens a file, so it cannot hang on a
FIFO or fail on a bad byte, and it reports what stands where a folder belongs instead of skipping it."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from schemas import files
from env_registry.errors import RegistryError

VERSION_DIR = re.compile(r"^v(\d{1,9})$")
SCRATCH_PREFIXES = (".staging-", ".retired-")
"""Folders writers make in the root and rename away; any left over belongs to a writer that died."""
NOT_A_FOLDER = "is not a folder"

Item = tuple[str, Path, "str | None"]


def folder_problem(item: os.DirEntry[str]) -> str | None:
    """None for a folder (or a link to one); else what it is instead."""
    try:
        if item.is_dir():
            return None
    except OSError as exc:
        return files.reason(exc)
    if item.is_symlink():
        return "is a symbolic link to nothing (dangling)"
    return NOT_A_FOLDER


def root_items(root: Path) -> list[tuple[str, Path, str | None]]:
    """(name, path, problem) for every visible entry of the root that is, or claims to be, a capability folder.

    Plain files at the top level are not entries; a missing root is an empty registry; an unreadable one raises.
    """
    try:
        with os.scandir(root) as scan:
            items = sorted(scan, key=lambda e: e.name)
    except FileNotFoundError:
        return []
    except OSError as exc:
        fix = "pass --registry with a folder (or set $TRACE_FACTORY_REGISTRY)"
        if exc.errno in (errno.EACCES, errno.EPERM):
            fix = f"fix its permissions (chmod u+rwx {root}) or " + fix
        raise RegistryError(f"cannot read the env registry: {files.explain(exc, fix)}") from None
    found = []
    for item in items:
        if item.name.startswith("."):
            continue
        problem = folder_problem(item)
        if problem != NOT_A_FOLDER:
            found.append((item.name, Path(item.path), problem))
    return found


def holds_entry(version_path: Path) -> bool:
    """Whether a version folder holds anything, from its listing alone (no file is opened). The registry never
    makes an empty ``v<N>`` (writes are staged and renamed), so an empty one (a stray ``mkdir``) is no env and
    Gymnasium must not be told it is; a folder with files but no manifest stays listed, so ``gym.make`` can say
    what is wrong with it."""
    try:
        with os.scandir(version_path) as scan:
            return next(scan, None) is not None
    except OSError:
        return True  # unreadable: registered, so gym.make reports the problem with its fix


def version_items(root: Path, capability: str) -> list[tuple[int, Path, str | None]]:
    """(version, path, problem) for every ``v<N>`` entry of a capability folder; OSError if it cannot be listed."""
    with os.scandir(root / capability) as scan:
        items = [(int(m.group(1)), item) for item in scan if (m := VERSION_DIR.match(item.name))]
    return sorted((number, Path(item.path), folder_problem(item)) for number, item in items)
