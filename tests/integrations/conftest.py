"""Integration tests: one registry for the module's envs, re-pointed at on every use (Gymnasium's registry is
process-wide, so another test module may have registered the same id from another root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TEST_ENVS

HERE_ENVS = Path(__file__).resolve().parent / "envs"


def register(root: Path, name: str) -> str:
    from env_registry.registration import register_version
    from env_registry.registry import Registry
    from trace_env.loader import load_env

    source = next(p for p in (TEST_ENVS / f"{name}.py", HERE_ENVS / f"{name}.py") if p.exists()).read_text()
    env = load_env(source)
    manifest, _ = Registry(root).put(source, capability=env.capability, target=env.target, tools=env.tools(), max_steps=env.max_steps)
    register_version(manifest.capability, manifest.version, root, replace=True)
    return manifest.gym_id


@pytest.fixture(scope="module")
def integration_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("integration-registry")


@pytest.fixture
def tiny_id(integration_registry: Path) -> str:
    """trace/tiny_cancel-v0: six turns at most; cancelling a refundable booking scores 1."""
    return register(integration_registry, "tiny_cancel")


@pytest.fixture
def wifi_id(integration_registry: Path) -> str:
    """trace/wifi_on-v0: one call solves it; the trainer tests' learnable env."""
    return register(integration_registry, "wifi_on")


@pytest.fixture
def vowels_id(integration_registry: Path) -> str:
    """trace/vowels-v0: two turns; random text already earns different rewards (see envs/vowels.py)."""
    return register(integration_registry, "vowels")


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    from trainer.tiny_model import TinySpec, ensure_tiny_model

    return ensure_tiny_model(spec=TinySpec(hidden_size=128, intermediate_size=384))
