"""The on-disk registry: versions, atomic writes, locking under concurrency, tamper detection."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trace_env.loader import load_env
from env_registry.registry import IntegrityError, Registry, RegistryError
from schemas.manifest import Provenance


def put(registry: Registry, source: str, **extra: object):
    env = load_env(source)
    return registry.put(
        source, capability=env.capability, target=env.target, tools=env.tools(), max_steps=env.max_steps,
        provenance=Provenance(generator="manual"), **extra,
    )


def test_put_get_and_version_bump_only_on_code_change(tmp_path: Path, tiny_source: str) -> None:
    registry = Registry(tmp_path)
    first, created = put(registry, tiny_source)
    assert (first.version, created) == (0, True)
    same, created = put(registry, tiny_source, report={"passed": True})
    assert (same.version, created) == (0, False)
    assert registry.get("tiny_cancel").report == {"passed": True}
    changed, created = put(registry, tiny_source + "\n# tweak\n")
    assert (changed.version, created) == (1, True)
    assert registry.versions("tiny_cancel") == [0, 1]
    assert registry.get("tiny_cancel").manifest.version == 1
    assert registry.get("tiny_cancel", 0).source == tiny_source
    assert [m.gym_id for m in registry.manifests()] == ["trace/tiny_cancel-v0", "trace/tiny_cancel-v1"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".staging", ".retired"))]


@pytest.mark.parametrize("victim", ["env.py", "manifest.json", "report.json"])
def test_tampered_files_are_refused_with_clear_message(tmp_path: Path, tiny_source: str, victim: str) -> None:
    registry = Registry(tmp_path)
    put(registry, tiny_source, report={"checks": []})
    path = tmp_path / "tiny_cancel" / "v0" / victim
    text = path.read_text()
    if victim == "manifest.json":
        data = json.loads(text)
        data["max_steps"] = 99
        path.write_text(json.dumps(data))
    else:
        path.write_text(text.replace("refundable", "refundablE", 1) if victim == "env.py" else text.replace("[]", "[1]"))
    with pytest.raises(IntegrityError, match=r"trace/tiny_cancel-v0 .* fails its content-hash check.*factory build"):
        registry.get("tiny_cancel")


def test_corrupt_manifest_and_missing_env(tmp_path: Path, tiny_source: str) -> None:
    registry = Registry(tmp_path)
    put(registry, tiny_source)
    (tmp_path / "tiny_cancel" / "v0" / "manifest.json").write_text("{broken")
    with pytest.raises(RegistryError, match="corrupt manifest"):
        registry.get("tiny_cancel")
    assert registry.manifests() == []  # listing skips what it cannot read
    with pytest.raises(RegistryError, match=r"no env capability 'nope'.*factory build --capability nope"):
        registry.get("nope")


def test_remove(tmp_path: Path, tiny_source: str) -> None:
    registry = Registry(tmp_path)
    put(registry, tiny_source)
    put(registry, tiny_source + "#2\n")
    assert registry.remove("tiny_cancel", 0) == [0]
    assert registry.versions("tiny_cancel") == [1]
    assert registry.remove("tiny_cancel") == [1]
    assert registry.capabilities() == []
    with pytest.raises(RegistryError):
        registry.remove("tiny_cancel")


def test_concurrent_writers_stay_consistent(tmp_path: Path, tiny_source: str) -> None:
    """Eight processes write four distinct sources at once: four versions, each intact and verifiable."""
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from trace_env.loader import load_env
        from env_registry.registry import Registry
        root, source_path, tag = sys.argv[1], sys.argv[2], sys.argv[3]
        source = Path(source_path).read_text() + f"\\n# variant {tag}\\n"
        env = load_env(source)
        for _ in range(5):
            Registry(root).put(source, capability=env.capability, target=env.target, tools=env.tools(), max_steps=env.max_steps)
        """
    )
    source_path = tmp_path / "tiny.py"
    source_path.write_text(tiny_source)
    root = tmp_path / "reg"
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(root), str(source_path), str(i % 4)], stderr=subprocess.PIPE)
        for i in range(8)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    registry = Registry(root)
    versions = registry.versions("tiny_cancel")
    assert len(versions) >= 4  # a variant can reappear after another one and earn a new version
    sources = {registry.get("tiny_cancel", v).source for v in versions}
    assert {s.strip().splitlines()[-1] for s in sources} == {f"# variant {i}" for i in range(4)}
    assert versions == list(range(len(versions)))
    assert not [p for p in root.iterdir() if p.name.startswith((".staging", ".retired"))]


def test_leftovers_of_dead_writers_are_swept_by_the_next_write(tmp_path: Path, tiny_source: str) -> None:
    registry = Registry(tmp_path)
    put(registry, tiny_source)
    for name in (".staging-dead1", ".retired-dead2"):
        (tmp_path / name / "old").mkdir(parents=True)
        (tmp_path / name / "old" / "env.py").write_text("half")
    put(registry, tiny_source, report={"refreshed": True})
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".staging", ".retired"))]
    assert registry.get("tiny_cancel").report == {"refreshed": True}


def test_refresh_without_atomic_exchange_still_swaps_whole_versions(
    tmp_path: Path, tiny_source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where renameat2(RENAME_EXCHANGE) is missing, two renames replace the folder; readers retry the gap."""
    import env_registry.registry as registry_module

    monkeypatch.setattr(registry_module, "exchange", lambda a, b: False)
    registry = Registry(tmp_path)
    put(registry, tiny_source, report={"n": 1})
    put(registry, tiny_source, report={"n": 2})
    assert registry.get("tiny_cancel").report == {"n": 2}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".staging", ".retired"))]


def test_a_failed_first_write_leaves_no_empty_capability_folder(
    tmp_path: Path, tiny_source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    real_rename = os.rename

    def full(src, dst):  # noqa: ANN001
        if Path(dst).name == "v0":
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", full)
    with pytest.raises(OSError):
        put(Registry(tmp_path), tiny_source)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]
