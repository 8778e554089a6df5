"""The on-disk registry of envs: one directory per stored version, sealed by a content hash.

Layout under the root (``$TRACE_FACTORY_REGISTRY`` or ``~/.cache/trace-factory/envs``)::

    <capability>/v<N>/env.py          the env module source
    <capability>/v<N>/manifest.json   EnvManifest (capability, target, tools, provenance, hashes)
    <capability>/v<N>/report.json     the validation report, when there is one

Writes go to a staging directory inside the root and are renamed (or atomically exchanged) into place under a
file lock, so a reader never sees half an env and two builds never collide. A reader reads one version through
one directory handle: it sees either the old or the new folder whole. If the hash check then fails, it asks
whether that folder is still the one at the path: if not, a writer swapped it mid-read and the read is
repeated; if it is, the files really were edited after registration (:class:`IntegrityError`).

Every entry is read on its own: a damaged one (not UTF-8, unreadable, a folder or FIFO where a file belongs,
a symlink loop) becomes a broken :class:`Entry` with the fix, and every other entry still loads.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout

from schemas import files
from env_registry.errors import BrokenEntryError, IntegrityError, RegistryError, broken
from env_registry.layout import SCRATCH_PREFIXES, holds_entry, root_items, version_items
from env_registry.snapshot import StoredEnv, VersionReader, content_hash, source_sha256
from env_registry.swap import exchange
from schemas.manifest import EnvManifest, Provenance
from schemas.names import CAPABILITY_RULE, capability_problem, is_capability_name

__all__ = [
    "BrokenEntryError", "Entry", "IntegrityError", "Registry", "RegistryError", "StoredEnv", "content_hash", "default_root",
    "source_sha256",
]

ROOT_ENV_VAR = "TRACE_FACTORY_REGISTRY"
LOCK_TIMEOUT_S = 120.0

Status = Literal["ok", "broken", "tampered"]


def default_root() -> Path:
    configured = os.environ.get(ROOT_ENV_VAR)
    if configured:
        return Path(configured).expanduser()
    try:
        return Path.home() / ".cache" / "trace-factory" / "envs"
    except (RuntimeError, KeyError):
        raise RegistryError(f"no home folder to keep the env registry in: set ${ROOT_ENV_VAR} or pass --registry") from None


@dataclass
class Entry:
    """One listed registry entry: verified (``ok``), or ``broken``/``tampered`` with ``problem`` saying the fix."""

    capability: str
    version: int | None
    path: Path
    status: Status
    manifest: EnvManifest | None = None
    problem: str | None = None

    @property
    def gym_id(self) -> str:
        return f"trace/{self.capability}-v{self.version}" if self.version is not None else f"trace/{self.capability}"


class Registry:
    """Read and write envs under one root directory."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root).expanduser() if root else default_root()
        self._reader = VersionReader(self.root)

    @property
    def swap_retries(self) -> int:
        """Reads repeated because a writer swapped the folder mid-read (a figure for tests and benchmarks)."""
        return self._reader.swap_retries

    # --- writing ------------------------------------------------------------------------------
    @contextmanager
    def lock(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.root / ".lock"), timeout=LOCK_TIMEOUT_S)
        try:
            lock.acquire()
        except Timeout:
            raise RegistryError(
                f"registry {self.root} stayed locked by another process for {LOCK_TIMEOUT_S:.0f} s; wait for the "
                f"other build to end (if none is running, delete {self.root / '.lock'})"
            ) from None
        try:
            yield
        finally:
            lock.release()

    def put(
        self,
        source: str,
        *,
        capability: str,
        target: str,
        tools: list[dict[str, Any]],
        max_steps: int,
        description: str = "",
        provenance: Provenance | None = None,
        report: dict[str, Any] | None = None,
        validation: str = "unvalidated",
    ) -> tuple[EnvManifest, bool]:
        """Store an env. Returns its manifest and whether a new version was created.

        Unchanged source keeps its version (the manifest and report are refreshed); changed source, or a
        broken or tampered latest version, gets the next version number.
        """
        self._check_name(capability)
        with self.lock():
            self.sweep()
            versions = self.versions(capability)
            latest = None
            if versions:
                try:
                    latest = self._read_version(capability, versions[-1]).manifest
                except RegistryError:
                    latest = None
            digest = source_sha256(source)
            if latest is not None and latest.source_sha256 == digest:
                version, created = latest.version, False
            else:
                version, created = (versions[-1] + 1 if versions else 0), True
            manifest = EnvManifest(
                capability=capability,
                target=target,
                version=version,
                description=description,
                max_steps=max_steps,
                tools=tools,  # type: ignore[arg-type]
                source_sha256=digest,
                provenance=provenance or Provenance(),
                validation=validation,  # type: ignore[arg-type]
            )
            report_text = json.dumps(report, indent=2, sort_keys=True, default=str) + "\n" if report is not None else None
            manifest.content_hash = content_hash(source, manifest, report_text)
            self._write_version(manifest, source, report_text)
            return manifest, created

    def _write_version(self, manifest: EnvManifest, source: str, report_text: str | None) -> None:
        final = self.root / manifest.capability / f"v{manifest.version}"
        new_capability = not os.path.lexists(final.parent)
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=self.root))
        except OSError:
            if new_capability:
                _remove_empty(final.parent)
            raise
        try:
            contents = {manifest.source_file: source, "manifest.json": manifest.model_dump_json(indent=2) + "\n"}
            if report_text is not None:
                contents["report.json"] = report_text
            for name, text in contents.items():
                with open(staging / name, "x", encoding="utf-8") as handle:
                    handle.write(text)
                    handle.flush()
                    os.fsync(handle.fileno())
            fsync_dir(staging)
            if os.path.lexists(final):
                # Same version refreshed: swap atomically where the kernel can (the old folder lands at `staging`
                # and is deleted below); readers holding the old folder notice and read again (see _read_once).
                if not exchange(staging, final):
                    retired = Path(tempfile.mkdtemp(prefix=".retired-", dir=self.root))
                    os.rename(final, retired / "old")
                    os.rename(staging, final)
                    shutil.rmtree(retired, ignore_errors=True)
            else:
                os.rename(staging, final)
            fsync_dir(final.parent)
        except BaseException:
            if new_capability:
                _remove_empty(final.parent)  # a failed first write leaves no empty capability folder behind
            raise
        finally:
            if os.path.lexists(staging):
                shutil.rmtree(staging, ignore_errors=True)

    def remove(self, capability: str, version: int | None = None) -> list[int]:
        """Delete one version, or a whole capability folder (broken entries included). Returns the versions removed."""
        with self.lock():
            self.sweep()
            if capability not in {name for name, _, _ in self._root_items()}:
                raise RegistryError(self._missing_message(capability, version))
            folder = self.root / capability
            if version is None:
                try:
                    doomed = self.versions(capability)
                except RegistryError:
                    doomed = []  # unreadable: its versions cannot be listed, but the folder can still go
                self._discard(folder)
                return doomed
            if version not in self.versions(capability):
                raise RegistryError(self._missing_message(capability, version))
            self._discard(folder / f"v{version}")
            if not self.versions(capability):
                self._discard(folder)
            return [version]

    def sweep(self) -> list[Path]:
        """Delete staging and retired folders left by writers that died (call with the lock held)."""
        swept = []
        try:
            names = os.listdir(self.root)
        except OSError:
            return swept
        for name in names:
            if name.startswith(SCRATCH_PREFIXES):
                path = self.root / name
                shutil.rmtree(path, ignore_errors=True)
                if not os.path.lexists(path):
                    swept.append(path)
        return swept

    def _discard(self, path: Path) -> None:
        """Move a file or folder out of the registry in one rename, then delete it (a later sweep retries)."""
        trash = Path(tempfile.mkdtemp(prefix=".retired-", dir=self.root))
        os.rename(path, trash / "old")
        shutil.rmtree(trash, ignore_errors=True)

    # --- listing: names only, never opens a file ------------------------------------------------
    def _root_items(self) -> list[tuple[str, Path, str | None]]:
        return root_items(self.root)

    def _version_items(self, capability: str) -> list[tuple[int, Path, str | None]]:
        return version_items(self.root, capability)

    def capabilities(self) -> list[str]:
        """Capability folders holding at least one version entry (broken ones included)."""
        names = []
        for name, _, problem in self._root_items():
            try:
                if problem is None and self._version_items(name):
                    names.append(name)
            except OSError:
                names.append(name)
        return names

    def versions(self, capability: str) -> list[int]:
        """Every version number present (broken entries included, so numbering never reuses one)."""
        try:
            return [number for number, _, _ in self._version_items(capability)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            if os.path.lexists(self.root) and not self.root.is_dir():
                raise RegistryError(
                    f"registry {self.root} is not a folder; pass --registry with the registry folder (or set ${ROOT_ENV_VAR})"
                ) from None
            raise self._broken(capability, None, files.explain(exc, "")) from None

    def version_ids(self) -> list[tuple[str, int]]:
        """(capability, version) of every entry, from names alone: for Gymnasium registration; never raises."""
        found: list[tuple[str, int]] = []
        try:
            items = self._root_items()
        except RegistryError:
            return found
        for name, _, problem in items:
            if problem is None and is_capability_name(name):
                try:  # an empty version folder (a writer that died, a stray mkdir) is no env: not registered
                    found.extend((name, number) for number, path, vproblem in self._version_items(name)
                                 if vproblem is None and holds_entry(path))
                except OSError:
                    continue
        return found

    # --- reading ------------------------------------------------------------------------------
    def entries(self) -> list[Entry]:
        """Every entry, each verified on its own: ``ok``, ``tampered`` or ``broken`` (with the fix)."""
        found = []
        for name, path, problem in self._root_items():
            if problem is None and not is_capability_name(name):
                problem = f"is not a capability folder (names are {CAPABILITY_RULE})"
            if problem is not None:
                found.append(Entry(name, None, path, "broken", problem=self._broken(name, None, f"{path} {problem}").args[0]))
                continue
            try:
                versions = self._version_items(name)
            except OSError as exc:
                found.append(Entry(name, None, path, "broken", problem=self._broken(name, None, files.explain(exc, "")).args[0]))
                continue
            for number, vpath, vproblem in versions:
                if vproblem is not None:
                    found.append(Entry(name, number, vpath, "broken", problem=self._broken(name, number, f"{vpath} {vproblem}").args[0]))
                    continue
                try:
                    stored = self._read_version(name, number)
                    found.append(Entry(name, number, vpath, "ok", manifest=stored.manifest))
                except IntegrityError as exc:
                    found.append(Entry(name, number, vpath, "tampered", manifest=exc.manifest, problem=str(exc)))
                except RegistryError as exc:
                    found.append(Entry(name, number, vpath, "broken", problem=str(exc)))
        return found

    def manifests(self) -> list[EnvManifest]:
        """The manifests of every verified entry (broken and tampered ones are left out: see :meth:`entries`)."""
        return [e.manifest for e in self.entries() if e.status == "ok" and e.manifest is not None]

    def get(self, capability: str, version: int | None = None) -> StoredEnv:
        """Read and verify one env version (the latest when ``version`` is None)."""
        self._check_name(capability)
        versions = self.versions(capability)
        if version is None:
            if not versions:
                raise RegistryError(self._missing_message(capability, None))
            version = versions[-1]
        elif version not in versions:
            raise RegistryError(self._missing_message(capability, version))
        return self._read_version(capability, version)

    def _read_version(self, capability: str, version: int) -> StoredEnv:
        return self._reader.read(capability, version, lambda: self._missing_message(capability, version))

    # --- messages -----------------------------------------------------------------------------
    def _broken(self, capability: str, version: int | None, detail: str) -> BrokenEntryError:
        return broken(self.root, capability, version, detail)

    def _check_name(self, capability: str) -> None:
        problem = capability_problem(capability)
        if problem:
            raise RegistryError(problem)

    def _missing_message(self, capability: str, version: int | None) -> str:
        try:
            known = ", ".join(self.capabilities()) or "none"
        except RegistryError:
            known = "unreadable"
        what = f"trace/{capability}-v{version}" if version is not None else f"capability {capability!r}"
        return f"no env {what} in registry {self.root} (registered: {known}); build it with `factory build --capability {capability}`"


def _remove_empty(folder: Path) -> None:
    try:
        os.rmdir(folder)
    except OSError:
        pass  # not empty (a concurrent writer put something there) or already gone


def fsync_dir(path: Path) -> None:
    """Make renames in ``path`` durable; some file systems cannot fsync a folder, which is fine."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
