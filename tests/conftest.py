"""Shared test set-up: an isolated registry root, and paths to the shared target data."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Before any test module imports env_registry (which registers stored envs on import), point the
# registry at a private directory so tests never read or write the user's real registry; made only when
# none is set (setdefault's argument would make one every time) and removed when the session ends.
if "TRACE_FACTORY_REGISTRY" not in os.environ:
    os.environ["TRACE_FACTORY_REGISTRY"] = tempfile.mkdtemp(prefix="trace-registry-")
    atexit.register(shutil.rmtree, os.environ["TRACE_FACTORY_REGISTRY"], True)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_TARGETS = REPO_ROOT.parent / "shared" / "targets"
TEST_ENVS = Path(__file__).resolve().parent / "envs"


#: The project's variables: the only ones a command sets in its own process (others belong to fixtures).
OWN_VARIABLES = ("TRACE_",)


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Each test ends with the project's variables as it began with them: commands run in-process set some for
    the processes they start (``--registry`` sets $TRACE_FACTORY_REGISTRY), which must not reach the next
    test on the same worker (it would point at a folder already removed)."""
    before = {k: v for k, v in os.environ.items() if k.startswith(OWN_VARIABLES)}
    yield
    for key in [k for k in os.environ if k.startswith(OWN_VARIABLES) and k not in before]:
        del os.environ[key]
    os.environ.update(before)


@pytest.fixture
def registry_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "registry"
    monkeypatch.setenv("TRACE_FACTORY_REGISTRY", str(root))
    return root


@pytest.fixture
def tiny_source() -> str:
    return (TEST_ENVS / "tiny_cancel.py").read_text()


@pytest.fixture
def checked_source() -> str:
    """The tiny env with its reward hole closed (tiny_cancel.py pays for reading and saying nothing): for tests
    that need an env the whole gate admits."""
    return (TEST_ENVS.parent / "gate" / "envs" / "tiny_checked.py").read_text()
