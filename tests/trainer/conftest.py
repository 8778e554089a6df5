"""Trainer test set-up: one registry for the session with the test envs, and the tiny models.

Gymnasium's registry is process-wide, so every trainer test shares one registry root (a session temp
dir) rather than one per test: an id registered against a deleted root would otherwise linger.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import TEST_ENVS

pytest.importorskip("torch")
pytest.importorskip("peft")


def register_env_file(root: Path, path: Path, validate: bool = True) -> str:
    """Register an env module the way `factory build` does: gate first, registry only if it passes."""
    return register_env_source(root, path.read_text(), validate)


def register_env_source(root: Path, source: str, validate: bool = True) -> str:
    """``register_env_file`` for an env module's source (the hostile envs are built, not stored)."""
    from env_registry.registration import register_all
    from env_registry.registry import Registry
    from factory.validation.gate import Gate, validate_source
    from schemas.manifest import Provenance
    from trace_env.loader import load_env

    if validate:
        report = validate_source(source, Gate(backend=os.environ.get("TRACE_FACTORY_SANDBOX", "auto")))
        assert report.passed, [c for c in report.checks if not c.passed]
        info = report.env_info
        assert info is not None
        manifest, _ = Registry(root).put(
            source, capability=info["capability"], target=info["target"], tools=info["tools"], max_steps=info["max_steps"],
            provenance=Provenance(generator="manual"), report=report.model_dump(mode="json"), validation="passed",
        )
    else:
        env = load_env(source)
        manifest, _ = Registry(root).put(source, capability=env.capability, target=env.target, tools=env.tools(),
                                         max_steps=env.max_steps)
    register_all(root)
    return manifest.gym_id


@pytest.fixture(scope="session")
def trainer_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("trainer-registry")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRACE_FACTORY_REGISTRY", str(root))
        yield root


@pytest.fixture(scope="session")
def wifi_env(trainer_registry: Path) -> str:
    """trace/wifi_on-v0, the learning test's env, registered without the gate: it is deliberately the smallest
    task a tiny model can learn on two CPU cores (one call, the same on every seed), and the gate rightly
    rejects exactly that (diversity: one action pattern; grpo_signal: saturated mixture rollouts)."""
    return register_env_file(trainer_registry, TEST_ENVS / "wifi_on.py", validate=False)


@pytest.fixture(scope="session")
def cancel_env(trainer_registry: Path) -> str:
    return register_env_file(trainer_registry, TEST_ENVS / "tiny_cancel.py", validate=False)


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """A tiny Qwen3 (128 dims) LoRA can move: fast, enough for plumbing, resume and DDP checks."""
    from trainer.tiny_model import TinySpec, ensure_tiny_model

    return ensure_tiny_model(spec=TinySpec(hidden_size=128, intermediate_size=384))


@pytest.fixture(scope="session")
def learnable_model() -> Path:
    """The LoRA-trainable tiny Qwen3 (256 dims, no ceiling on token probabilities), for the learning test."""
    from trainer.tiny_model import LORA_TRAINABLE, ensure_tiny_model

    return ensure_tiny_model(spec=LORA_TRAINABLE)


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run fastest on one thread; more only fight the env workers for the cores."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
