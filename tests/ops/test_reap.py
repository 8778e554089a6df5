"""``factory sandbox reap`` keeps the exit-code contract (issue 23): 1 when it found something of a dead process
and could not remove it (each item named, with why, and its lease kept for the next reap), 0 once all is gone.

The stuck item is real, not a mock: a file the reaping user cannot delete (``chattr +i`` as root, a read-only
folder otherwise), inside a dead sandbox's work dir."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from factory.cli.exits import FAILED, OK
from tests.ops.conftest import run_factory


def dead_owner() -> str:
    """An owner id whose process is gone (the lease format of ``sandbox.owners``: host, pid, start time)."""
    from sandbox import procfs

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = procfs.start_time(child.pid)
    child.wait()
    return f"{socket.gethostname()}:{child.pid}:{start or '1'}"


@dataclass
class Leftovers:
    runtime: Path  # $TRACE_SANDBOX_RUNTIME_DIR for the reaping process
    stuck: Path  # a dead sandbox's work dir holding a file this user cannot remove
    gone: Path  # a dead sandbox's work dir that can be removed
    release: Callable[[], None]  # makes the stuck file removable again

    def lease(self, root: Path) -> Path:
        return self.runtime / "leases" / f"{root.name}.json"

    def env(self) -> dict[str, str]:
        return {"TRACE_SANDBOX_RUNTIME_DIR": str(self.runtime), "DOCKER_HOST": f"unix://{self.runtime}/no-docker.sock"}


def make_leftovers(tmp: Path) -> Leftovers:
    runtime = tmp / "runtime"
    (runtime / "leases").mkdir(parents=True)
    owner = dead_owner()
    roots = []
    for name in ("trace-sbx-stuck", "trace-sbx-gone"):
        root = tmp / name
        (root / "work" / "data").mkdir(parents=True)
        (root / "work" / "data" / "file").write_text("left behind")
        (runtime / "leases" / f"{name}.json").write_text(json.dumps({"owner": owner, "backend": "bwrap", "name": name, "root": str(root)}))
        roots.append(root)
    pinned = roots[0] / "work" / "data"
    if os.geteuid() == 0:  # root removes anything in a writable folder: an immutable file is the one it cannot
        if subprocess.run(["chattr", "+i", str(pinned / "file")], capture_output=True).returncode != 0:
            pytest.skip("running as root on a file system without chattr +i: nothing here is unremovable")
        release = lambda: subprocess.run(["chattr", "-i", str(pinned / "file")], check=True)  # noqa: E731
    else:
        pinned.chmod(0o500)
        release = lambda: pinned.chmod(0o700)  # noqa: E731
    return Leftovers(runtime, roots[0], roots[1], release)


@pytest.fixture
def leftovers(tmp_path: Path) -> Iterator[Leftovers]:
    found = make_leftovers(tmp_path)
    try:
        yield found
    finally:
        if found.stuck.exists():
            found.release()


def test_reap_exits_1_naming_what_it_could_not_remove_and_0_once_all_is_gone(leftovers: Leftovers) -> None:
    ran = run_factory("sandbox", "reap", **leftovers.env(), timeout=120)
    assert ran.code == FAILED, (ran.code, ran.stdout, ran.stderr)
    assert len(ran.lines) == 1 or all(not line.startswith("error:") for line in ran.lines[:-1]), ran.stderr
    said = ran.lines[-1]
    assert said.startswith("error: could not remove 1 leftover of dead processes:") and f"work dir {leftovers.stuck}" in said, said
    assert "operation not permitted" in said or "permission denied" in said, said
    assert f"work dir {leftovers.gone}" in ran.stdout and not leftovers.gone.exists()  # the rest went on
    assert leftovers.stuck.exists() and leftovers.lease(leftovers.stuck).exists()  # its lease kept: the next reap tries again
    assert not leftovers.lease(leftovers.gone).exists()

    as_json = run_factory("sandbox", "reap", "--json", **leftovers.env(), timeout=120)
    left = json.loads(as_json.stdout)["left"]
    assert as_json.code == FAILED and len(left) == 1 and left[0].startswith(f"work dir {leftovers.stuck} ("), as_json.stdout

    leftovers.release()
    again = run_factory("sandbox", "reap", **leftovers.env(), timeout=120)
    assert again.code == OK, again.stderr
    assert f"work dir {leftovers.stuck}" in again.stdout and not leftovers.stuck.exists()
    assert not leftovers.lease(leftovers.stuck).exists()
