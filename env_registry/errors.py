"""The registry's errors: one root (:class:`RegistryError`), every message naming the entry and its fix."""

from __future__ import annotations

from pathlib import Path

from schemas.manifest import EnvManifest
from schemas.names import is_capability_name


class RegistryError(RuntimeError):
    """A registry operation failed; the message names the env and what to do."""


class BrokenEntryError(RegistryError):
    """A stored entry cannot be read (damaged, unreadable, not what the registry writes)."""


class IntegrityError(RegistryError):
    """Stored files do not match their content hash: they were changed after registration."""

    def __init__(self, message: str, manifest: EnvManifest | None = None) -> None:
        super().__init__(message)
        self.manifest = manifest


def broken(root: Path, capability: str, version: int | None, detail: str) -> BrokenEntryError:
    """The error for a damaged entry: what is wrong, then the command (or chmod) that fixes it."""
    what = f"env trace/{capability}-v{version}" if version is not None else f"registry entry {capability!r}"
    fix = f"remove it with `factory envs remove {capability}" + (f" --version {version}`" if version is not None else "`")
    if is_capability_name(capability):
        fix += f" and rebuild it with `factory build --capability {capability}`"
    if "permission denied" in detail or "not permitted" in detail:
        fix = f"fix its permissions (chmod -R u+rwX {root / capability}) or {fix}"
    return BrokenEntryError(f"{what} is broken: {detail.rstrip('; ')}; {fix}")
