"""Tests against real target data skip without ../shared; in CI that would hide them, so CI fails instead."""

from __future__ import annotations

import os

import pytest

from tests.conftest import SHARED_TARGETS


@pytest.mark.skipif(os.environ.get("CI", "").lower() != "true", reason="only CI must have ../shared beside the repo")
def test_ci_has_the_shared_target_data() -> None:
    assert (SHARED_TARGETS / "tau2" / "airline" / "tools.json").is_file(), f"CI expects the real target data at {SHARED_TARGETS}"
