"""Apply a routing decision with vLLM: a ``LoRARequest`` on a local engine, or the adapter's name as the
``model`` of a request to an OpenAI-compatible server started with its LoRA modules.

vLLM applies exactly one LoRA per request, so a soft mix must first be written as its own adapter
(:meth:`router.apply_peft.AdapterSet.export`, rank = sum of the mixed ranks; start vLLM with a
``--max-lora-rank`` that fits) and served under a name of its own. ``vllm`` is an optional import.

    engine = LLM(model=BASE, enable_lora=True, max_lora_rank=64)
    engine.generate(prompt, params, lora_request=lora_request(decision, menu.adapters()))

    # vllm serve BASE --enable-lora --lora-modules $(lora_modules_arg(menu.adapters()))
    client.chat.completions.create(model=served_model(decision, BASE), messages=...)
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from router.errors import AdapterError, RouterError
from router.schema import RouteDecision


def _single(decision: RouteDecision) -> str | None:
    if decision.choice is None:
        return None
    if len(decision.weights) > 1:
        raise RouterError(
            f"a soft decision mixes {len(decision.weights)} adapters but vLLM applies one LoRA per request; export the "
            f"mix with AdapterSet.export(decision, DIR) and serve that folder, or route with soft mode off"
        )
    return decision.choice


def lora_int_ids(adapters: Mapping[str, str | Path]) -> dict[str, int]:
    """Stable positive integer ids (vLLM's ``lora_int_id``): 1, 2, ... in name order."""
    return {name: i for i, name in enumerate(sorted(adapters), start=1)}


def lora_request(decision: RouteDecision, adapters: Mapping[str, str | Path]) -> Any:
    """The ``vllm.lora.request.LoRARequest`` for a decision, or None for the base model."""
    name = _single(decision)
    if name is None:
        return None
    if name not in adapters:
        raise AdapterError(f"no adapter folder for {name!r}; known: {', '.join(sorted(adapters)) or 'none'}")
    try:
        from vllm.lora.request import LoRARequest
    except ImportError:
        raise RouterError("vLLM is not installed: pip install vllm (on a machine with a supported GPU)") from None
    return LoRARequest(lora_name=name, lora_int_id=lora_int_ids(adapters)[name], lora_path=str(Path(adapters[name]).resolve()))


def served_model(decision: RouteDecision, base_model: str, served_names: Mapping[str, str] | None = None) -> str:
    """The ``model`` to request from an OpenAI-compatible server: the adapter's served name, or the base
    model's name when the decision is "no adapter". ``served_names`` maps capability -> served name when
    the server was started with other names than the capabilities'."""
    name = _single(decision)
    if name is None:
        return base_model
    return (served_names or {}).get(name, name)


def routed_spec(spec: Any, decision: RouteDecision, served_names: Mapping[str, str] | None = None) -> Any:
    """A ``llm_clients.spec.LLMSpec`` whose model is the routed one (same provider and base URL), so any
    ``factory`` LLM client can run the routed agent."""
    return spec.model_copy(update={"model": served_model(decision, spec.model, served_names)})


def lora_modules_arg(adapters: Mapping[str, str | Path]) -> str:
    """The value of ``vllm serve --lora-modules`` that serves every adapter under its capability's name."""
    return " ".join(shlex.quote(f"{name}={Path(path).resolve()}") for name, path in sorted(adapters.items()))
