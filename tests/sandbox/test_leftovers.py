"""Leases: what a sandbox of a dead owner left is reaped; a live owner's, another host's or a garbled lease is
left alone. (The end-to-end proof, with real sandboxes killed by SIGKILL, is tests/faults/test_sigkill.py.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import leftovers, procfs


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRACE_SANDBOX_RUNTIME_DIR", str(tmp_path / "runtime"))
    return tmp_path


def dead_owner() -> str:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = procfs.start_time(child.pid)
    child.wait()
    return f"{socket.gethostname()}:{child.pid}:{start or '1'}"


def lease(runtime: Path, name: str, owner: str) -> Path:
    root = runtime / name
    (root / "work").mkdir(parents=True)
    (root / "work" / "file").write_text("left behind")
    path = leftovers.lease_dir() / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"owner": owner, "backend": "bwrap", "name": name, "root": str(root)}))
    return root


def test_dead_owners_leftovers_are_reaped_and_live_ones_kept(runtime: Path) -> None:
    dead = lease(runtime, "trace-sbx-dead", dead_owner())
    live = lease(runtime, "trace-sbx-live", leftovers.owner_id())
    remote = lease(runtime, "trace-sbx-remote", "another-host:1:1")
    recycled = lease(runtime, "trace-sbx-recycled", f"{socket.gethostname()}:{os.getpid()}:0")  # our pid, not our start
    (leftovers.lease_dir() / "garbled.json").write_text("{not json")
    removed = leftovers.reap()
    assert not dead.exists() and not recycled.exists()
    assert live.exists() and remote.exists()
    assert sorted(p.name for p in leftovers.lease_dir().iterdir()) == ["garbled.json", "trace-sbx-live.json", "trace-sbx-remote.json"]
    assert f"work dir {dead}" in removed


def test_reap_once_runs_once_per_process_and_never_raises(runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(leftovers, "_reaped", False)
    monkeypatch.setattr(leftovers, "reap", lambda: calls.append(1) or (_ for _ in ()).throw(OSError("boom")))
    assert leftovers.reap_once() == [] and leftovers.reap_once() == []
    assert calls == [1]


def test_only_sandbox_dirs_are_ever_removed(runtime: Path) -> None:
    """A lease cannot make the reaper delete an arbitrary directory."""
    victim = runtime / "precious"
    victim.mkdir()
    path = leftovers.lease_dir() / "evil.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    fake_cgroup = runtime / "trace-sbx-fake"  # has the name, but is not under .../trace-factory/ in /sys/fs/cgroup
    fake_cgroup.mkdir()
    (fake_cgroup / "cgroup.procs").write_text(f"{sleeper.pid}\n")
    path.write_text(json.dumps({"owner": dead_owner(), "backend": "bwrap", "root": str(victim),
                                "cgroups": [str(fake_cgroup)], "mount": "/proc", "container": "someone-elses"}))
    try:
        assert leftovers.release_resources(json.loads(path.read_text())) == []
        leftovers.reap()
        assert sleeper.poll() is None  # not killed
    finally:
        sleeper.kill()
        sleeper.wait()
    assert victim.exists() and os.path.ismount("/proc")
