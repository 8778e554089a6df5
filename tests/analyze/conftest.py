"""Fixtures for capability-analysis tests: the real τ² data from ../shared/targets, and isolation."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_TAU2 = Path(__file__).resolve().parents[2].parent / "shared" / "targets" / "tau2"
TASK_FILES = [SHARED_TAU2 / "airline" / "tasks.json", SHARED_TAU2 / "retail" / "tasks.json"]


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACE_FACTORY_CACHE", str(tmp_path / "cache-root"))
    for name in ("TRACE_LLM", "TRACE_LLM_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def tau2_domains():
    if not SHARED_TAU2.is_dir():
        pytest.skip(f"real τ² data not found at {SHARED_TAU2}")
    from factory.testing.tau2_replay import Tau2Domain

    return [Tau2Domain.load(SHARED_TAU2 / name) for name in ("airline", "retail")]


@pytest.fixture(scope="session")
def injected_cases(tau2_domains):
    from factory.testing.injection import build_cases

    return build_cases(tau2_domains, seed=0)


@pytest.fixture(scope="session")
def task_files() -> list[Path]:
    if not SHARED_TAU2.is_dir():
        pytest.skip(f"real τ² data not found at {SHARED_TAU2}")
    return TASK_FILES
