"""Rollout tests never touch the network, the user's caches or real keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.targets.helpers import isolate_llm_env


@pytest.fixture(autouse=True)
def no_llm_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_llm_env(monkeypatch, tmp_path)
