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

import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout
from pydantic import ValidationError

from env_registry import files
from env_registry.swap import exchange
from schemas.manifest import EnvManifest, Provenance

ROOT_ENV_VAR = "TRACE_FACTORY_REGISTRY"
LOCK_TIMEOUT_S = 120.0
SWAP_WAIT_S = 5.0
"""How long a reader waits out a concurrent rewrite of the version it reads before giving up."""
MISSING_WAIT_S = 1.0
"""How long a listed version may stay absent (a rename in flight) before it counts as removed."""
_VERSION_DIR = re.compile(r"^v(\d{1,9})$")
_CAPABILITY = re.compile(r"^[a-z][a-z0-9_]{1,63}$")
_SCRATCH_PREFIXES = (".staging-", ".retired-")
MANIFEST_CACHE_SIZE = 256
NOT_A_FOLDER = "is not a folder"

Status = Literal["ok", "broken", "tampered"]


class RegistryError(RuntimeError):
    """A registry operation failed; the message names the env and what to do."""


class BrokenEntryError(RegistryError):
    """A stored entry cannot be read (damaged, unreadable, not what the registry writes)."""


class IntegrityError(RegistryError):
    """Stored files do not match their content hash: they were changed after registration."""

    def __init__(self, message: str, manifest: EnvManifest | None = None) -> None:
        super().__init__(message)
        self.manifest = manifest


class _Swapped(Exception):
    """The folder being read was replaced or removed meanwhile: read it again."""


def default_root() -> Path:
    configured = os.environ.get(ROOT_ENV_VAR)
    if configured:
        return Path(configured).expanduser()
    try:
        return Path.home() / ".cache" / "trace-factory" / "envs"
    except (RuntimeError, KeyError):
        raise RegistryError(f"no home folder to keep the env registry in: set ${ROOT_ENV_VAR} or pass --registry") from None


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
        self.swap_retries = 0
        """Reads repeated because a writer swapped the folder mid-read (a figure for tests and benchmarks)."""
        self._parsed: dict[bytes, EnvManifest] = {}
        """Manifests by the sha256 of their bytes: validating tool schemas costs milliseconds, and the same
        bytes always parse the same (a trainer making many envs reads one manifest many times)."""

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
            _fsync_dir(staging)
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
            _fsync_dir(final.parent)
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
            if name.startswith(_SCRATCH_PREFIXES):
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
        """(name, path, problem) for every visible entry of the root that is, or claims to be, a capability folder."""
        try:
            with os.scandir(self.root) as scan:
                items = sorted(scan, key=lambda e: e.name)
        except FileNotFoundError:
            return []
        except OSError as exc:
            fix = "pass --registry with a folder (or set $TRACE_FACTORY_REGISTRY)"
            if exc.errno in (errno.EACCES, errno.EPERM):
                fix = f"fix its permissions (chmod u+rwx {self.root}) or " + fix
            raise RegistryError(f"cannot read the env registry: {files.explain(exc, fix)}") from None
        found = []
        for item in items:
            if item.name.startswith("."):
                continue
            problem = _folder_problem(item)
            if problem != NOT_A_FOLDER:
                found.append((item.name, Path(item.path), problem))
        return found

    def _version_items(self, capability: str) -> list[tuple[int, Path, str | None]]:
        """(version, path, problem) for every ``v<N>`` entry of a capability folder; OSError if it cannot be listed."""
        with os.scandir(self.root / capability) as scan:
            items = [(int(m.group(1)), item) for item in scan if (m := _VERSION_DIR.match(item.name))]
        return sorted((number, Path(item.path), _folder_problem(item)) for number, item in items)

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
            raise self._broken(capability, None, files.explain(exc, "")) from None

    def version_ids(self) -> list[tuple[str, int]]:
        """(capability, version) of every entry, from names alone: for Gymnasium registration; never raises."""
        found: list[tuple[str, int]] = []
        try:
            items = self._root_items()
        except RegistryError:
            return found
        for name, _, problem in items:
            if problem is None and _CAPABILITY.match(name):
                try:
                    found.extend((name, number) for number, _, _ in self._version_items(name))
                except OSError:
                    continue
        return found

    # --- reading ------------------------------------------------------------------------------
    def entries(self) -> list[Entry]:
        """Every entry, each verified on its own: ``ok``, ``tampered`` or ``broken`` (with the fix)."""
        found = []
        for name, path, problem in self._root_items():
            if problem is None and not _CAPABILITY.match(name):
                problem = "is not a capability folder (names are lower-case letters, digits and _)"
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
        """Read one version, again whenever a concurrent writer swapped its folder mid-read."""
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
                        raise RegistryError(self._missing_message(capability, version)) from None
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
            raise self._broken(capability, version, files.explain(exc, "")) from None
        try:

            def read(name: str, optional: bool = False) -> bytes | None:
                try:
                    return files.read_regular(name, dir_fd=dir_fd)
                except FileNotFoundError:
                    if _moved(folder, dir_fd):
                        raise _Swapped() from None
                    if optional:
                        return None
                    raise self._broken(capability, version, f"{folder / name} is missing") from None
                except OSError as exc:
                    exc.filename = str(folder / name)
                    raise self._broken(capability, version, files.explain(exc, "")) from None

            manifest = self._parse_manifest(read("manifest.json") or b"", folder / "manifest.json", capability, version)
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

    def _parse_manifest(self, raw: bytes, path: Path, capability: str, version: int) -> EnvManifest:
        key = hashlib.sha256(raw).digest()
        if key in self._parsed:
            manifest = self._parsed[key].model_copy(deep=True)
        else:
            manifest = self._validate_manifest(raw, path, capability, version)
            if len(self._parsed) >= MANIFEST_CACHE_SIZE:
                self._parsed.pop(next(iter(self._parsed)))
            self._parsed[key] = manifest.model_copy(deep=True)
        if (manifest.capability, manifest.version) != (capability, version):
            raise self._broken(capability, version, f"{path} describes {manifest.gym_id}, not the folder it is in")
        return manifest

    def _validate_manifest(self, raw: bytes, path: Path, capability: str, version: int) -> EnvManifest:
        try:
            return EnvManifest.model_validate_json(files.decode_utf8(raw, path))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(root)"
            raise self._broken(capability, version, f"{path}: corrupt manifest ({where}: {first['msg']})") from None
        except ValueError as exc:
            raise self._broken(capability, version, str(exc)) from None

    # --- messages -----------------------------------------------------------------------------
    def _broken(self, capability: str, version: int | None, detail: str) -> BrokenEntryError:
        what = f"env trace/{capability}-v{version}" if version is not None else f"registry entry {capability!r}"
        fix = f"remove it with `factory envs remove {capability}" + (f" --version {version}`" if version is not None else "`")
        if _CAPABILITY.match(capability):
            fix += f" and rebuild it with `factory build --capability {capability}`"
        if "permission denied" in detail or "not permitted" in detail:
            fix = f"fix its permissions (chmod -R u+rwX {self.root / capability}) or {fix}"
        return BrokenEntryError(f"{what} is broken: {detail.rstrip('; ')}; {fix}")

    def _check_name(self, capability: str) -> None:
        if not _CAPABILITY.match(capability):
            raise RegistryError(
                f"{capability!r} is not a capability name (lower-case letters, digits and _, starting with a letter, 2-64 characters)"
            )

    def _missing_message(self, capability: str, version: int | None) -> str:
        try:
            known = ", ".join(self.capabilities()) or "none"
        except RegistryError:
            known = "unreadable"
        what = f"trace/{capability}-v{version}" if version is not None else f"capability {capability!r}"
        return f"no env {what} in registry {self.root} (registered: {known}); build it with `factory build --capability {capability}`"


def _folder_problem(item: os.DirEntry[str]) -> str | None:
    """None for a folder (or a link to one); else what it is instead."""
    try:
        if item.is_dir():
            return None
    except OSError as exc:
        return files.reason(exc)
    if item.is_symlink():
        return "is a symbolic link to nothing (dangling)"
    return NOT_A_FOLDER


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


def _remove_empty(folder: Path) -> None:
    try:
        os.rmdir(folder)
    except OSError:
        pass  # not empty (a concurrent writer put something there) or already gone


def _fsync_dir(path: Path) -> None:
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
