"""Reading one stored version whole, even while a writer swaps it.

Every file of a version is read through one open handle on its folder, so a read sees one folder, the old or
the new, never a mix. When the content hash then disagrees, the question is whether that folder is still the
one at the path: if not, a writer swapped it mid-read and the read is repeated; if it is, the files were edited
after registration (:class:`IntegrityError`). So a concurrent rebuild never looks like tampering, and tampering
never passes for a rebuild.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from schemas import files
from env_registry.errors import IntegrityError, RegistryError, broken
from schemas.errors import validation_message
from schemas.manifest import EnvManifest

SWAP_WAIT_S = 5.0
"""How long a reader waits out a concurrent rewrite of the version it reads before giving up."""
MISSING_WAIT_S = 1.0
"""How long a listed version may stay absent (a rename in flight) before it counts as removed."""
MANIFEST_CACHE_SIZE = 256


def _as_bytes(part: str | bytes) -> bytes:
    return part.encode("utf-8") if isinstance(part, str) else part


def content_hash(source: str | bytes, manifest: EnvManifest, report_text: str | bytes | None) -> str:
    """sha256 over source, manifest (its own hash blanked) and report: any edit to any of them shows."""
    sealed = manifest.model_copy(update={"content_hash": ""}).model_dump_json()
    digest = hashlib.sha256()
    for part in (source, sealed, report_text or ""):
        digest.update(_as_bytes(part))
        digest.update(b"\0")
    return digest.hexdigest()


def source_sha256(source: str | bytes) -> str:
    return hashlib.sha256(_as_bytes(source)).hexdigest()


@dataclass
class StoredEnv:
    """One verified env version read from the registry."""

    manifest: EnvManifest
    path: Path
    source: str
    report: dict[str, Any] | None


class _Swapped(Exception):
    """The folder being read was replaced or removed meanwhile: read it again."""


def _moved(folder: Path, dir_fd: int) -> bool:
    """Whether the folder open as ``dir_fd`` is no longer the one at ``folder`` (a writer swapped or removed it)."""
    held = os.fstat(dir_fd)
    if held.st_nlink == 0:
        return True
    try:
        current = os.stat(folder)
    except OSError:
        return True
    return (current.st_dev, current.st_ino) != (held.st_dev, held.st_ino)


class VersionReader:
    """Verified reads of version folders under one root; keeps parsed manifests and counts swap retries."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.swap_retries = 0
        """Reads repeated because a writer swapped the folder mid-read (a figure for tests and benchmarks)."""
        self._parsed: dict[bytes, EnvManifest] = {}
        """Manifests by the sha256 of their bytes: validating tool schemas costs milliseconds, and the same
        bytes always parse the same (a trainer making many envs reads one manifest many times)."""

    def read(self, capability: str, version: int, missing: Callable[[], str]) -> StoredEnv:
        """Read and verify ``<capability>/v<version>``, again whenever a writer swapped it mid-read.

        ``missing`` gives the message for a version that stays gone (removed while we looked).
        """
        folder = self.root / capability / f"v{version}"
        started = time.monotonic()
        missing_since: float | None = None
        delay = 0.001
        while True:
            try:
                return self._read_once(capability, version, folder)
            except _Swapped:
                self.swap_retries += 1
                now = time.monotonic()
                if os.path.lexists(folder):
                    missing_since = None
                else:
                    missing_since = missing_since or now
                    if now - missing_since > MISSING_WAIT_S:
                        raise RegistryError(missing()) from None
                if now - started > SWAP_WAIT_S:
                    raise RegistryError(
                        f"env trace/{capability}-v{version} at {folder} kept being rewritten while it was read for "
                        f"{SWAP_WAIT_S:.0f} s; another process is rebuilding it: retry when that build ends"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

    def _read_once(self, capability: str, version: int, folder: Path) -> StoredEnv:
        try:
            dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise _Swapped() from None
        except OSError as exc:
            raise broken(self.root, capability, version, files.explain(exc, "")) from None
        try:

            def read(name: str, optional: bool = False) -> bytes | None:
                try:
                    return files.read_regular(name, dir_fd=dir_fd)
                except FileNotFoundError:
                    if _moved(folder, dir_fd):
                        raise _Swapped() from None
                    if optional:
                        return None
                    raise broken(self.root, capability, version, f"{folder / name} is missing") from None
                except OSError as exc:
                    exc.filename = str(folder / name)
                    raise broken(self.root, capability, version, files.explain(exc, "")) from None

            manifest = self._manifest(read("manifest.json") or b"", folder / "manifest.json", capability, version)
            source = read(manifest.source_file) or b""
            report = read("report.json", optional=True)
            if manifest.content_hash != content_hash(source, manifest, report) or source_sha256(source) != manifest.source_sha256:
                if _moved(folder, dir_fd):
                    raise _Swapped()
                raise IntegrityError(
                    f"env trace/{capability}-v{version} at {folder} fails its content-hash check: its files were "
                    f"changed after registration. Rebuild it with `factory build --capability {capability}` "
                    f"or remove it with `factory envs remove {capability} --version {version}`.",
                    manifest=manifest,
                )
            # The bytes are what the registry wrote (the hash says so), so they decode.
            return StoredEnv(
                manifest=manifest, path=folder, source=source.decode("utf-8"),
                report=json.loads(report.decode("utf-8")) if report else None,
            )
        finally:
            os.close(dir_fd)

    def _manifest(self, raw: bytes, path: Path, capability: str, version: int) -> EnvManifest:
        key = hashlib.sha256(raw).digest()
        if key in self._parsed:
            manifest = self._parsed[key].model_copy(deep=True)
        else:
            manifest = self._validate(raw, path, capability, version)
            if len(self._parsed) >= MANIFEST_CACHE_SIZE:
                self._parsed.pop(next(iter(self._parsed)))
            self._parsed[key] = manifest.model_copy(deep=True)
        if (manifest.capability, manifest.version) != (capability, version):
            raise broken(self.root, capability, version, f"{path} describes {manifest.gym_id}, not the folder it is in")
        return manifest

    def _validate(self, raw: bytes, path: Path, capability: str, version: int) -> EnvManifest:
        try:
            return EnvManifest.model_validate_json(files.decode_utf8(raw, path))
        except ValidationError as exc:
            raise broken(self.root, capability, version, f"{path}: corrupt manifest ({validation_message(exc, limit=3)})") from None
        except ValueError as exc:
            raise broken(self.root, capability, version, str(exc)) from None
