"""Label-token routing of each task to one capability adapter, or to the base model (TRACE step 5).

    from router import AdapterSet, Router, RouterConfig, build_menu, load_base_model

    model, tokenizer = load_base_model(base)
    adapters = AdapterSet.load(model, {"precondition_verification": "adapters/precondition_verification"})
    menu = build_menu(adapters=adapters_on_disk)          # demos played in sandboxes
    router = Router(adapters.model, tokenizer, menu, RouterConfig(debias="cyclic"))
    decision = router.route(trajectory)                   # or chat messages, or text
    with adapters.applied(decision):
        ...                                               # generate with the routed adapter

Modules: ``schema`` (menu, config, decision), ``labels`` (one-token check), ``demos`` (reference episodes
via the sandbox), ``menu``, ``observation``, ``prompt``, ``frozen`` (base model with adapters disabled),
``decide`` (the router), ``apply_peft`` / ``apply_vllm`` (applying a decision), ``loading``,
``evaluate`` and ``charts`` (routing accuracy). Torch is imported only when a model is used.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from router.errors import AdapterError, DemoError, LabelTokenError, RouterError
from router.schema import NO_ADAPTER, MenuOption, RouteDecision, RouterConfig, RoutingMenu

_LAZY = {
    "Router": "router.decide",
    "AdapterSet": "router.apply_peft",
    "build_menu": "router.menu",
    "load_menu": "router.menu",
    "save_menu": "router.menu",
    "load_base_model": "router.loading",
    "adapters_in": "router.loading",
    "lora_request": "router.apply_vllm",
    "served_model": "router.apply_vllm",
    "routed_spec": "router.apply_vllm",
    "evaluate_routing": "router.evaluate",
}

__all__ = [
    "NO_ADAPTER", "AdapterError", "DemoError", "LabelTokenError", "MenuOption", "RouteDecision", "RouterConfig",
    "RouterError", "RoutingMenu", *_LAZY,
]  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'router' has no attribute {name!r}")
