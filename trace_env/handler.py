"""RPC methods that host one env inside a sandbox worker (``python -m sandbox.worker trace_env.handler``).

Everything that executes env code lives behind these methods, so the CLI, the validator and the trainer
only ever see JSON. One worker hosts one env: ``load`` first, then any mix of the other calls.
"""

from __future__ import annotations

import json
import sys
import types
from collections import OrderedDict
from typing import Any

from trace_env import sdk as _sdk
from trace_env.loader import load_env
from trace_env.engine import EpisodeRunner, run_episode
from trace_env.sdk import Scenario, TaskEnv, Turn

_state: dict[str, Any] = {}
_SCENARIO_CACHE_SIZE = 256
_scenarios: OrderedDict[int, str] = OrderedDict()


def _scenario(seed: int) -> Scenario:
    """``generate(seed)``, memoised as JSON so each caller gets a fresh copy.

    Validation asks for the same seed's scenario several times (solution, episode, reset). The ``generate``
    method itself is never memoised: the determinism check must see two real calls.
    """
    text = _scenarios.get(seed)
    if text is None:
        text = json.dumps(_env().generate(seed).to_dict())
        _scenarios[seed] = text
        if len(_scenarios) > _SCENARIO_CACHE_SIZE:
            _scenarios.popitem(last=False)
    else:
        _scenarios.move_to_end(seed)
    return Scenario(**json.loads(text))


def _env() -> TaskEnv:
    env = _state.get("env")
    if env is None:
        raise RuntimeError("no env loaded in this worker: call 'load' first")
    return env


def _action(item: Any) -> Any:
    """Actions arrive as JSON: a turn in its wire form (``{"content", "calls"}``), an OpenAI message, or raw text."""
    return Turn.from_json(item) if isinstance(item, dict) and "calls" in item else item


def install_legacy_sdk_alias() -> None:
    """Env modules of earlier releases write ``from env_registry import sdk``.

    Inside the sandbox ``env_registry`` (the host side: Gymnasium, registry, pydantic) is not shipped, so
    that spelling is served by a stub package whose ``sdk`` is this SDK. On the host ``env_registry``
    itself provides the same alias.
    """
    if "env_registry" in sys.modules:
        return
    stub = types.ModuleType("env_registry", "Inside the sandbox: only the env SDK (trace_env.sdk), under its old name.")
    stub.__path__ = []  # a package, so ``import env_registry.sdk`` resolves through sys.modules
    stub.sdk = _sdk  # type: ignore[attr-defined]
    sys.modules["env_registry"] = stub
    sys.modules["env_registry.sdk"] = _sdk


def load(params: dict[str, Any]) -> dict[str, Any]:
    install_legacy_sdk_alias()
    env = load_env(params["source"], module_name=params.get("module_name"))
    _state["env"] = env
    _state["runner"] = None
    _scenarios.clear()
    return {
        "capability": env.capability,
        "target": env.target,
        "description": env.description,
        "tool_names": list(env.tool_names),
        "tools": env.tools(),
        "max_steps": env.max_steps,
        "write_tools": sorted(env.write_tools),
        "terminal_tools": sorted(env.terminal_tools),
    }


def generate(params: dict[str, Any]) -> dict[str, Any]:
    scenario = _env().generate(int(params["seed"]))
    return {"fingerprint": scenario.fingerprint(), "truth": scenario.truth, "meta": scenario.meta}


def solution(params: dict[str, Any]) -> list[dict[str, Any]]:
    env = _env()
    scenario = _scenario(int(params["seed"]))
    solve = env.reference_solution if params["which"] == "reference" else env.capability_skipping_solution
    return [t.to_json() for t in solve(scenario)]


def episode(params: dict[str, Any]) -> dict[str, Any]:
    env = _env()
    seed = int(params["seed"])
    if "policy" in params:
        turns: list[Any] = solution({"seed": seed, "which": params["policy"]})
    else:
        turns = params.get("turns", [])
    result = run_episode(env, seed, [_action(t) for t in turns], _scenario(seed))
    if not params.get("with_messages", True):
        result.pop("messages")
    return result


def reset(params: dict[str, Any]) -> dict[str, Any]:
    runner = EpisodeRunner(_env())
    _state["runner"] = runner
    seed = int(params["seed"])
    return runner.reset(seed, _scenario(seed)).to_dict()


def step(params: dict[str, Any]) -> dict[str, Any]:
    runner = _state.get("runner")
    if runner is None:
        raise RuntimeError("call 'reset' before 'step'")
    return runner.step(_action(params.get("action"))).to_dict()


METHODS = {"load": load, "generate": generate, "solution": solution, "episode": episode, "reset": reset, "step": step}
