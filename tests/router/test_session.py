"""The Python entry point later stages use: one spec in, model + adapters + menu + router out."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.errors import AdapterError
from router.menu import save_menu
from router.session import RouterSpec, open_session
from tests.router.helpers import greedy


def test_a_session_loads_every_adapter_once_and_routes_with_the_base(menu, adapter_dirs, plain_model, tokenizer, tmp_path: Path) -> None:
    saved = save_menu(menu, tmp_path / "menu.json")
    adapters_dir = adapter_dirs[next(iter(adapter_dirs))].parent
    session = open_session(RouterSpec(adapters_dir=str(adapters_dir), menu=str(saved)))  # base model read from the adapters
    assert session.adapters is not None and session.adapters.names == menu.capabilities
    assert set(session.model.peft_config) == set(menu.capabilities)
    decision = session.router.route("Please cancel my reservation.")
    assert sum(decision.probabilities.values()) == pytest.approx(1.0)
    with session.adapters.applied(None):
        assert greedy(session.model, tokenizer) == greedy(plain_model, tokenizer)
    with session.adapters.applied(menu.capabilities[1]):
        assert greedy(session.model, tokenizer) != greedy(plain_model, tokenizer)


def test_adapters_of_different_base_models_are_refused(menu, adapter_dirs, tmp_path: Path) -> None:
    import json
    import shutil

    other = tmp_path / "adapters"
    for name, path in adapter_dirs.items():
        shutil.copytree(path, other / name)
    config = other / menu.capabilities[0] / "adapter_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "base_model_name_or_path": "some/other-model"}))
    with pytest.raises(AdapterError, match="different base models"):
        open_session(RouterSpec(adapters_dir=str(other), menu=str(save_menu(menu, tmp_path / "menu.json"))))
