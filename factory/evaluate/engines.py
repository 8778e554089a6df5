"""Host side: the model every arm runs on, opened once - a local transformers model (``hf``) or an
OpenAI-compatible server with LoRA modules (``server``) - and the router for the routed arm.

The routing menu is read from ``--menu``, else from the evaluation folder's own ``menu.json`` (written the
first time it is built, so a resumed evaluation never plays the demos in the sandbox again).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from factory.evaluate.policies import RoutedPolicy, ServedModel, SharedModel
from factory.evaluate.schema import ADAPTER_PREFIX, ARM_BASE, ARM_ROUTED, EvalConfig, EvalError
from factory.rollout.policies import Policy


class Engine:
    """Policies per arm over one model; ``decide`` routes a task (serialised: the router is not thread-safe)."""

    def __init__(self, make: Callable[[Any, str], Policy], base_spec: str, adapter_spec: Callable[[str], str], decide: Any,
                 lock: Any, log: Any) -> None:  # fmt: skip
        self.make = make
        self.base_spec = base_spec
        self.adapter_spec = adapter_spec
        self.router = decide
        self.lock = lock
        self.log = log
        self._cache: dict[tuple[str, str], Policy] = {}

    def policy(self, arm: str, target: str) -> Policy:
        key = (arm, target)
        if key not in self._cache:
            self._cache[key] = self._build(arm, target)
        return self._cache[key]

    def _build(self, arm: str, target: str) -> Policy:
        if arm == ARM_BASE:
            return self.make(None, self.base_spec)
        if arm.startswith(ADAPTER_PREFIX):
            name = arm.removeprefix(ADAPTER_PREFIX)
            return self.make(name, self.adapter_spec(name))
        if arm == ARM_ROUTED:
            if self.router is None:
                raise EvalError("the routed arm needs a router; this engine was opened without one")

            def decide(task_id: str, messages: list[dict[str, Any]]) -> Any:
                with self.lock:
                    return self.router.route(messages, task_id=task_id)

            def chosen(decision: Any) -> Policy:
                return self.make(decision, f"{self.base_spec}@{decision.choice or 'base'}")

            return RoutedPolicy(decide, chosen, f"routed:{self.base_spec}", lambda task, d: self.log.record(target, task.id, d))
        raise EvalError(f"unknown arm {arm!r}")

    def close(self) -> None:
        self._cache.clear()


def router_spec(config: EvalConfig, model: str, adapters: dict[str, Path], menu_file: Path) -> Any:
    from router.session import RouterSpec

    menu = config.menu or (str(menu_file) if menu_file.is_file() else None)
    return RouterSpec(
        model=model, adapters={k: str(v) for k, v in adapters.items()}, capabilities_report=config.capabilities,
        registry=config.registry, menu=menu, sandbox=config.sandbox, device=config.device, dtype=config.dtype,
        config=config.router,
    )  # fmt: skip


def _save_menu(session: Any, config: EvalConfig, menu_file: Path) -> None:
    if config.menu is None and not menu_file.is_file():
        from router.menu import save_menu

        save_menu(session.menu, menu_file)


def open_engine(
    config: EvalConfig, model: str, adapters: dict[str, Path], menu_file: Path, log: Any,
    menu_progress: Callable[[str, int, int], None] | None = None,
) -> Engine:  # fmt: skip
    routed = ARM_ROUTED in config.arms
    if config.engine == "server":
        return _server_engine(config, model, adapters, menu_file, log, menu_progress if routed else None, routed)
    return _hf_engine(config, model, adapters, menu_file, log, menu_progress, routed)


def _hf_engine(config: EvalConfig, model: str, adapters: dict[str, Path], menu_file: Path, log: Any,
               menu_progress: Any, routed: bool) -> Engine:  # fmt: skip
    from router.apply_peft import AdapterSet
    from router.loading import AdapterPrompts, load_base_model

    prompts = AdapterPrompts.read(adapters, config.compact_tools)  # before the model loads: a bad record fails fast
    base_spec = f"hf:{model}"
    router = None
    if routed:
        from router.session import open_session

        session = open_session(router_spec(config, model, adapters, menu_file), progress=menu_progress)
        _save_menu(session, config, menu_file)
        base, tokenizer, adapter_set, router = session.model, session.tokenizer, session.adapters, session.router
    else:
        base, tokenizer = load_base_model(model, device=config.device, dtype=config.dtype)
        adapter_set = AdapterSet.load(base, {k: str(v) for k, v in adapters.items()}) if adapters else None
        base = adapter_set.model if adapter_set is not None else base
    shared = SharedModel(base, tokenizer, adapter_set, base_spec, config.temperature, config.max_tokens or 512, prompts)
    return Engine(shared.policy, base_spec, lambda name: f"{base_spec}@{adapters[name]}", router, shared.lock, log)


def _server_engine(config: EvalConfig, model: str, adapters: dict[str, Path], menu_file: Path, log: Any,
                   menu_progress: Any, routed: bool) -> Engine:  # fmt: skip
    from router.loading import AdapterPrompts

    assert config.base_url is not None
    served = ServedModel(config.base_url, config.served_model or model, config.temperature, config.max_tokens,
                         AdapterPrompts.read(adapters, config.compact_tools))  # fmt: skip
    if config.load_adapters:
        load_server_adapters(config.base_url, adapters)
    router = None
    if routed:
        from router.session import open_session

        session = open_session(router_spec(config, model, adapters, menu_file), progress=menu_progress, load_adapters=False)
        _save_menu(session, config, menu_file)
        router = session.router
    return Engine(served.policy, f"compat:{served.base_name}", lambda name: f"compat:{name}", router, threading.Lock(), log)


def load_server_adapters(base_url: str, adapters: dict[str, Path], timeout_s: float = 120.0) -> None:
    """vLLM's runtime LoRA API (server started with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``): load each
    adapter under its capability's name. One that is already loaded is fine."""
    import httpx

    root = base_url.rstrip("/")
    for name, path in sorted(adapters.items()):
        body = {"lora_name": name, "lora_path": str(Path(path).resolve())}
        try:
            response = httpx.post(f"{root}/load_lora_adapter", json=body, timeout=timeout_s)
        except httpx.HTTPError as exc:
            raise EvalError(f"cannot load adapter {name} into the server at {base_url}: {type(exc).__name__}: {exc}") from None
        text = response.text[:300]
        if response.status_code >= 400 and "already" not in text.lower():
            raise EvalError(
                f"the server at {base_url} refused adapter {name} ({response.status_code}: {' '.join(text.split())}); "
                f"start vLLM with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, or with --lora-modules"
            )
