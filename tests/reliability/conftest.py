"""Fault fixtures: registries with one sound entry beside damaged ones, unwritable and full folders, and a way to
run the real ``factory`` entry point (``main``) in-process or as a subprocess and read its one-line outcome.

Root ignores file permissions, so "unreadable" is reproduced as root by dropping the DAC capabilities of a
subprocess (``setpriv``); read-only and full folders are real tmpfs mounts when this process may mount, and
otherwise an ENOSPC/EROFS injected at the one write that would meet it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from env_registry.registry import Registry
from schemas.manifest import Provenance
from tests.conftest import REPO_ROOT, TEST_ENVS
from trace_env.loader import load_env

TINY = (TEST_ENVS / "tiny_cancel.py").read_text()
FAST_GATE = ["--set", "solvability_seeds=30", "--set", "necessity_seeds=30", "--set", "diversity_seeds=60", "--set", "fuzz_examples=15"]


def put(root: Path, capability: str = "tiny_cancel", source: str = TINY, **extra: object):
    """Register ``source`` under ``capability`` without the gate (the registry is what is under test)."""
    env = load_env(source)
    return Registry(root).put(
        source, capability=capability, target=env.target, tools=env.tools(), max_steps=env.max_steps,
        provenance=Provenance(generator="manual"), **extra,
    )


def one_line(text: str) -> str:
    """The single non-empty line of ``text``; fails the test when there are more, or a traceback."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert "Traceback" not in text, text
    assert len(lines) == 1, text
    return lines[0]


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def factory_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Run ``factory ARGS`` through the real entry point in this process, at 80 columns."""
    from factory.cli import main

    monkeypatch.setenv("COLUMNS", "80")

    def run(*args: str) -> Outcome:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["factory", *args])
        with pytest.raises(SystemExit) as exited:
            main()
        out = capsys.readouterr()
        return Outcome(int(exited.value.code or 0), out.out, out.err)

    return run


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRACE_FACTORY_UNSAFE_INPROCESS"}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def no_dac_prefix() -> list[str]:
    """A command prefix under which root, too, is refused by file permissions; [] when not root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a file unreadable to this user")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}"]


def run_python(code: str, root: Path, *, unprivileged: bool = False, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    command = [*(no_dac_prefix() if unprivileged else []), sys.executable, "-c", code]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          env=subprocess_env(TRACE_FACTORY_REGISTRY=str(root), **env))


def run_factory(*args: str, unprivileged: bool = False, timeout: float = 60, **env: str) -> Outcome:
    command = [*(no_dac_prefix() if unprivileged else []), sys.executable, "-m", "factory.cli", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=subprocess_env(COLUMNS="80", **env))
    return Outcome(done.returncode, done.stdout, done.stderr)


# --- folders that cannot be written -------------------------------------------------------------
def _can_mount() -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    probe = Path(f"/tmp/trace-factory-mount-probe-{uuid.uuid4().hex[:8]}")
    probe.mkdir()
    try:
        ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(probe)], capture_output=True).returncode == 0
        if ok:
            subprocess.run(["umount", str(probe)], check=True)
        return ok
    finally:
        probe.rmdir()


CAN_MOUNT = _can_mount()


@contextlib.contextmanager
def tmpfs(path: Path, size: str, readonly: bool = False) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if readonly else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def readonly_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody (root included) can write: a read-only tmpfs, or mode 0555 for a non-root user."""
    folder = tmp_path / "readonly"
    if CAN_MOUNT:
        with tmpfs(folder, "1m", readonly=True):
            yield folder
        return
    if os.geteuid() == 0:
        pytest.skip("root without mount: cannot make a folder read-only to root")
    folder.mkdir()
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)


def fill(folder: Path) -> None:
    """Write into ``folder`` until its device is full."""
    with open(folder / "ballast", "wb") as handle:
        with contextlib.suppress(OSError):
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MiB file system to fill at the moment a test chooses (see :func:`fill`)."""
    if not CAN_MOUNT:
        pytest.skip("needs root and mount for a real full disk; the injected variant covers the same handling")
    with tmpfs(tmp_path / "small", "4m") as folder:
        yield folder
