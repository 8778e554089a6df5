"""The on-disk registry of envs: one directory per stored version, sealed by a content hash.

Layout under the root (``$TRACE_FACTORY_REGISTRY`` or ``~/.cache/trace-factory/envs``)::

    <capability>/v<N>/env.py          the env module source
    <capability>/v<N>/manifest.json   EnvManifest (capability, target, tools, provenance, hashes)
    <capability>/v<N>/report.json     the validation report, when there is one

Every write goes to a temporary directory inside the root and is renamed into place under a file lock, so a
reader never sees half an env and two concurrent builds never collide. Loading recomputes the content
hash and refuses an env whose files were edited after registration.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock
from pydantic import ValidationError

from schemas.manifest import EnvManifest, Provenance

ROOT_ENV_VAR = "TRACE_FACTORY_REGISTRY"
LOCK_TIMEOUT_S = 120.0
_VERSION_DIR = re.compile(r"^v(\d+)$")


class RegistryError(RuntimeError):
    """A registry operation failed; the message names the env and what to do."""


class IntegrityError(RegistryError):
    """Stored files do not match their content hash: they were changed after registration."""


def default_root() -> Path:
    configured = os.environ.get(ROOT_ENV_VAR)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "trace-factory" / "envs"


def content_hash(source: str, manifest: EnvManifest, report_text: str | None) -> str:
    """sha256 over source, manifest (its own hash blanked) and report: any edit to any of them shows."""
    sealed = manifest.model_copy(update={"content_hash": ""}).model_dump_json()
    digest = hashlib.sha256()
    for part in (source, sealed, report_text or ""):
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def source_sha256(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


@dataclass
class StoredEnv:
    """One verified env version read from the registry."""

    manifest: EnvManifest
    path: Path
    source: str
    report: dict[str, Any] | None


class Registry:
    """Read and write envs under one root directory."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root).expanduser() if root else default_root()

    # --- writing ------------------------------------------------------------------------------
    def lock(self) -> FileLock:
        self.root.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self.root / ".lock"), timeout=LOCK_TIMEOUT_S)

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

        Unchanged source keeps its version (the manifest and report are refreshed); changed source gets
        the next version number.
        """
        with self.lock():
            versions = self.versions(capability)
            latest = self._read_manifest(capability, versions[-1]) if versions else None
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
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=self.root))
        try:
            (staging / manifest.source_file).write_text(source, encoding="utf-8")
            (staging / "manifest.json").write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
            if report_text is not None:
                (staging / "report.json").write_text(report_text, encoding="utf-8")
            for item in staging.iterdir():
                with open(item, "rb") as handle:
                    os.fsync(handle.fileno())
            if final.exists():
                # Same version refreshed: swap directories; readers retry the short gap (see get()).
                retired = Path(tempfile.mkdtemp(prefix=".retired-", dir=self.root))
                os.rename(final, retired / "old")
                os.rename(staging, final)
                shutil.rmtree(retired, ignore_errors=True)
            else:
                os.rename(staging, final)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)

    def remove(self, capability: str, version: int | None = None) -> list[int]:
        """Delete one version, or all versions of a capability. Returns the versions removed."""
        with self.lock():
            versions = self.versions(capability)
            doomed = versions if version is None else [v for v in versions if v == version]
            if not doomed:
                raise RegistryError(self._missing_message(capability, version))
            for number in doomed:
                trash = Path(tempfile.mkdtemp(prefix=".retired-", dir=self.root))
                os.rename(self.root / capability / f"v{number}", trash / "old")
                shutil.rmtree(trash, ignore_errors=True)
            if not self.versions(capability):
                shutil.rmtree(self.root / capability, ignore_errors=True)
            return doomed

    # --- reading ------------------------------------------------------------------------------
    def capabilities(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".") and self.versions(p.name))

    def versions(self, capability: str) -> list[int]:
        folder = self.root / capability
        if not folder.is_dir():
            return []
        found = [int(m.group(1)) for p in folder.iterdir() if (m := _VERSION_DIR.match(p.name)) and (p / "manifest.json").exists()]
        return sorted(found)

    def manifests(self) -> list[EnvManifest]:
        """Every readable manifest (unverified: for listing). Unreadable ones are skipped."""
        found = []
        for capability in self.capabilities():
            for version in self.versions(capability):
                try:
                    found.append(self._read_manifest(capability, version))
                except RegistryError:
                    continue
        return found

    def get(self, capability: str, version: int | None = None) -> StoredEnv:
        """Read and verify one env version (the latest when ``version`` is None)."""
        for attempt in range(3):
            try:
                return self._get_once(capability, version)
            except FileNotFoundError:
                time.sleep(0.05 * (attempt + 1))  # a concurrent refresh is swapping the directory
        raise RegistryError(self._missing_message(capability, version))

    def _get_once(self, capability: str, version: int | None) -> StoredEnv:
        versions = self.versions(capability)
        if version is None:
            if not versions:
                raise RegistryError(self._missing_message(capability, None))
            version = versions[-1]
        elif version not in versions:
            raise RegistryError(self._missing_message(capability, version))
        folder = self.root / capability / f"v{version}"
        manifest = self._read_manifest(capability, version)
        source = (folder / manifest.source_file).read_text(encoding="utf-8")
        report_path = folder / "report.json"
        report_text = report_path.read_text(encoding="utf-8") if report_path.exists() else None
        expected = content_hash(source, manifest, report_text)
        if manifest.content_hash != expected or source_sha256(source) != manifest.source_sha256:
            raise IntegrityError(
                f"env trace/{capability}-v{version} at {folder} fails its content-hash check: its files were "
                f"changed after registration. Rebuild it with `factory build --capability {capability}` "
                f"or remove it with `factory envs remove {capability} --version {version}`."
            )
        report = json.loads(report_text) if report_text else None
        return StoredEnv(manifest=manifest, path=folder, source=source, report=report)

    def _read_manifest(self, capability: str, version: int) -> EnvManifest:
        path = self.root / capability / f"v{version}" / "manifest.json"
        try:
            return EnvManifest.model_validate_json(path.read_text(encoding="utf-8"))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(root)"
            raise RegistryError(f"{path}: corrupt manifest ({where}: {first['msg']}); remove or rebuild this env") from None

    def _missing_message(self, capability: str, version: int | None) -> str:
        known = ", ".join(self.capabilities()) or "none"
        what = f"trace/{capability}-v{version}" if version is not None else f"capability {capability!r}"
        return f"no env {what} in registry {self.root} (registered: {known}); build it with `factory build --capability {capability}`"
