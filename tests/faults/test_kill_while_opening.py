"""A process killed while its bwrap sandbox is opening, between making something on the host and any later
step: the next reap removes all of it. The lease must name each thing before it exists; a kill that lands in
between once left a tmpfs mounted on a work dir (so the root dir could not be removed) or a cgroup behind.

The kill is placed exactly, by a patched step in a child process, instead of hoping a timed SIGKILL lands in
the window (tests/faults/test_sigkill.py does that end to end, and CI's faster machine once hit this window).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import available_backends, leftovers
from tests.faults.leftover_probes import mounts_under, sandbox_cgroups

REPO = Path(__file__).resolve().parents[2]
OPEN_AND_DIE = """
import os, signal, sys
from sandbox import bwrap_command, cgroups, open_sandbox

def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)

if sys.argv[1] == "tmpfs mounted":
    mount = bwrap_command.mount_tmpfs
    bwrap_command.mount_tmpfs = lambda target, options: (mount(target, options), die())[0]
else:  # every cgroup dir made, no limit written yet
    cgroups._apply = lambda cg, plan, optional: die()
open_sandbox("bwrap")
"""

pytestmark = pytest.mark.skipif(
    available_backends().get("bwrap") is not None or os.geteuid() != 0, reason="needs bwrap as root (tmpfs work dir and cgroups)"
)


@pytest.fixture
def tmp_path() -> Iterator[Path]:  # type: ignore[override]
    """A TMPDIR the sandbox's uid can traverse (pytest's own sits under a 0700 dir: sandboxes would go elsewhere)."""
    path = Path(tempfile.mkdtemp(prefix="trace-kill-open-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("point", ["tmpfs mounted", "cgroup made"])
def test_reap_removes_what_a_sandbox_killed_while_opening_made(tmp_path: Path, point: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "TRACE_SANDBOX_RUNTIME_DIR": str(tmp_path / "runtime"), "PYTHONPATH": str(REPO)}
    child = subprocess.run([sys.executable, "-c", OPEN_AND_DIE, point], env=env, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert child.returncode == -9, child.stderr
    names = [p.stem for p in (tmp_path / "runtime" / "leases").glob("*.json")]
    assert len(names) == 1, names
    made = {"tmpfs mounted": mounts_under(tmp_path), "cgroup made": sandbox_cgroups(names)}[point]
    assert made, f"the kill came too early to test anything at {point!r}"

    monkeypatch.setenv("TRACE_SANDBOX_RUNTIME_DIR", str(tmp_path / "runtime"))
    leftovers.reap()
    left = {
        "leases": [p.name for p in (tmp_path / "runtime" / "leases").glob("*.json")],
        "dirs": [p.name for p in tmp_path.glob("trace-sbx-*")],
        "mounts": mounts_under(tmp_path),
        "cgroups": sandbox_cgroups(names),
    }
    assert left == {"leases": [], "dirs": [], "mounts": [], "cgroups": []}, left
