"""LLM tests never touch the network, the user's cache or real keys."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_llm_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache_root = tmp_path / "cache-root"
    monkeypatch.setenv("TRACE_FACTORY_CACHE", str(cache_root))
    for name in ("TRACE_LLM", "TRACE_LLM_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return cache_root
