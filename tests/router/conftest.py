"""Real pieces for router tests: the tiny local model, PEFT adapters with non-zero weights, and envs that
passed the validation gate, registered in a temporary registry, whose reference episodes are played in
the sandbox to make the menu's demos."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from env_registry.registry import Registry  # noqa: E402
from tests.router.helpers import CAPABILITIES, load_plain, register_gated, variant_source  # noqa: E402

# The machine is shared: one thread per test process beats two threads fighting other processes for cores.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def gated_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("router-registry")
    for capability, description in CAPABILITIES.items():
        register_gated(root, variant_source(capability, description))
    return root


@pytest.fixture(scope="session")
def menu(gated_registry: Path):
    from router.menu import build_menu

    return build_menu(registry=Registry(gated_registry), capabilities=list(CAPABILITIES))


@pytest.fixture(scope="session")
def tiny_path() -> Path:
    from trainer.tiny_model import ensure_tiny_model

    return ensure_tiny_model()


@pytest.fixture(scope="session")
def tokenizer(tiny_path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_path)


@pytest.fixture(scope="session")
def plain_model(tiny_path: Path):
    return load_plain(tiny_path)


@pytest.fixture(scope="session")
def adapter_dirs(tiny_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One random LoRA per capability (B non-zero, so each one changes the output), saved by PEFT."""
    from peft import LoraConfig, get_peft_model

    root = tmp_path_factory.mktemp("adapters")
    out = {}
    for seed, capability in enumerate(CAPABILITIES, start=1):
        torch.manual_seed(seed)
        config = LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False)
        get_peft_model(load_plain(tiny_path), config).save_pretrained(root / capability)
        out[capability] = root / capability
    return out
