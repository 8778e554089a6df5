"""Fixtures shared by the sandbox tests: one factory for every backend, plus the E2B fake."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _sbx import TEST_LIMITS, _FakeE2B, backend_reason, construct  # noqa: E402

from sandbox import Sandbox, SandboxLimits  # noqa: E402


@pytest.fixture(scope="module")
def fake_e2b() -> Iterator[_FakeE2B]:
    if backend_reason("e2b-fake") is not None:
        pytest.skip(backend_reason("e2b-fake") or "")
    saved = {k: os.environ.get(k) for k in ("E2B_DEBUG", "E2B_SANDBOX_URL", "E2B_HTTP_VERSION")}
    fake = _FakeE2B()
    os.environ["E2B_DEBUG"] = "true"
    os.environ["E2B_SANDBOX_URL"] = fake.envd.url
    yield fake
    fake.envd.stop()
    shutil.rmtree(fake.dir, ignore_errors=True)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def make_sandbox(request: pytest.FixtureRequest) -> Iterator[Callable[..., Sandbox]]:
    """make_sandbox(name, limits=TEST_LIMITS) -> an open sandbox, closed after the test."""
    opened: list[Sandbox] = []

    def make(name: str, limits: SandboxLimits = TEST_LIMITS) -> Sandbox:
        reason = backend_reason(name)
        if reason is not None:
            pytest.skip(f"{name} unavailable: {reason}")
        fake = request.getfixturevalue("fake_e2b") if name == "e2b-fake" else None
        sb = construct(name, limits, fake)
        sb.open()
        opened.append(sb)
        return sb

    yield make
    for sb in opened:
        sb.close()


@pytest.fixture(scope="module")
def shared_sandboxes(request: pytest.FixtureRequest) -> Iterator[Callable[[str], Sandbox]]:
    """One open sandbox per backend for a whole module (the abuse probes also check that a
    sandbox stays usable after each attack)."""
    cache: dict[str, Sandbox] = {}

    def get(name: str) -> Sandbox:
        reason = backend_reason(name)
        if reason is not None:
            pytest.skip(f"{name} unavailable: {reason}")
        if name not in cache:
            fake = request.getfixturevalue("fake_e2b") if name == "e2b-fake" else None
            sb = construct(name, TEST_LIMITS, fake)
            sb.open()
            cache[name] = sb
        return cache[name]

    yield get
    for sb in cache.values():
        sb.close()

