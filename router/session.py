"""Everything routing needs, from one spec: base model, adapters, menu and router, ready to use.

This is the entry point for ``factory route`` and for later stages (``factory eval``, ``factory run``):

    session = open_session(RouterSpec(adapters_dir="adapters", capabilities_report="analysis/capabilities.json"))
    decision = session.router.route(task)
    with session.adapters.applied(decision):
        ...
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from env_registry.registry import Registry
from router.apply_peft import AdapterSet
from router.decide import Router
from router.errors import AdapterError, RouterError
from router.loading import adapter_base_model, adapters_in, load_base_model
from router.menu import MenuProgress, build_menu, load_menu
from router.schema import RouterConfig, RoutingMenu


class RouterSpec(BaseModel):
    """Where the pieces come from. Adapters: ``adapters_dir`` (one subfolder per capability) and/or
    ``adapters`` (capability -> folder). Menu: a saved ``menu`` file, else built from the registry."""

    model: str | None = Field(default=None, description="base model folder or hub id (default: the adapters' base)")
    adapters_dir: str | None = None
    adapters: dict[str, str] = Field(default_factory=dict)
    capabilities_report: str | None = Field(default=None, description="capabilities.json from factory analyze")
    registry: str | None = None
    menu: str | None = Field(default=None, description="a menu saved by `factory route --save-menu`")
    sandbox: str = "auto"
    device: str = "cpu"
    dtype: str = "auto"
    merge: bool = Field(default=False, description="merge the chosen adapter into the base weights")
    config: RouterConfig = Field(default_factory=RouterConfig)


@dataclass
class RouterSession:
    spec: RouterSpec
    model: Any
    tokenizer: Any
    menu: RoutingMenu
    router: Router
    adapters: AdapterSet | None


def resolve_adapters(spec: RouterSpec) -> dict[str, Path]:
    found: dict[str, Path] = adapters_in(Path(spec.adapters_dir)) if spec.adapters_dir else {}
    for name, path in spec.adapters.items():
        found[name] = Path(path)
    return found


def _report(spec: RouterSpec) -> Any:
    if spec.capabilities_report is None:
        return None
    from schemas.capability import load_capability_report

    return load_capability_report(Path(spec.capabilities_report), "--capabilities", RouterError)


def prepare_menu(spec: RouterSpec, adapters: dict[str, Path], progress: MenuProgress | None = None) -> RoutingMenu:
    """The saved menu (its adapters re-pointed to the ones given), or a new one built from the registry."""
    if spec.menu is not None:
        menu = load_menu(Path(spec.menu))
        if adapters:
            missing = sorted(set(adapters) - set(menu.capabilities))
            if missing:
                raise RouterError(f"menu {spec.menu} has no option for adapter(s) {', '.join(missing)}; rebuild it without --menu")
            options = [
                o.model_copy(update={"adapter": str(adapters[o.capability])}) if o.capability in adapters else o
                for o in menu.options
            ]
            menu = menu.model_copy(update={"options": options})
        return menu
    registry = Registry(spec.registry) if spec.registry else Registry()
    return build_menu(adapters=adapters or None, report=_report(spec), registry=registry, backend=spec.sandbox, progress=progress)


def open_session(spec: RouterSpec, progress: MenuProgress | None = None, load_adapters: bool = True) -> RouterSession:
    """Load the base model (and, unless told not to, every adapter), build or read the menu, make the router."""
    adapters = resolve_adapters(spec)
    menu = prepare_menu(spec, adapters, progress)
    on_menu = menu.adapters()
    model_id = spec.model or adapter_base_model({k: Path(v) for k, v in on_menu.items()})
    if model_id is None:
        raise RouterError("no base model: pass --model (the adapters' configs do not name one)")
    model, tokenizer = load_base_model(model_id, device=spec.device, dtype=spec.dtype)
    adapter_set = None
    if load_adapters and on_menu:
        adapter_set = AdapterSet.load(model, on_menu, merge=spec.merge)
        model = adapter_set.model
    elif load_adapters and adapters:
        raise AdapterError("the menu offers none of the given adapters")
    router = Router(model, tokenizer, menu, spec.config)
    return RouterSession(spec=spec, model=model, tokenizer=tokenizer, menu=menu, router=router, adapters=adapter_set)
