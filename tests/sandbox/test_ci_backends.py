"""In CI the real sandboxes are part of what is tested: a backend that is missing there fails, not skips."""

from __future__ import annotations

import os

import pytest

from sandbox import available_backends


@pytest.mark.skipif(os.environ.get("CI", "").lower() != "true", reason="only CI must provide every real backend")
@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_ci_provides_real_sandbox(backend: str) -> None:
    reason = available_backends()[backend]
    assert reason is None, f"{backend} is unavailable in CI: {reason} (scripts/sandbox-services.sh should have set it up)"
