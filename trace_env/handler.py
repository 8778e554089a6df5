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

from trace_env import gate_probe
from trace_env import sdk as _sdk
from trace_env.loader import load_env
from trace_env.engine import EpisodeRunner
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


def _remember(seed: int, scenario_json: str) -> None:
    _scenarios[seed] = scenario_json
    _scenarios.move_to_end(seed)
    if len(_scenarios) > _SCENARIO_CACHE_SIZE:
        _scenarios.popitem(last=False)


def generate(params: dict[str, Any]) -> dict[str, Any]:
    """A real (uncached) ``generate(seed)``, timed (see gate_probe.Stopwatch); the whole scenario on request."""
    watch = gate_probe.Stopwatch()
    scenario = _env().generate(int(params["seed"]))
    generate_ms = watch.ms()
    if not isinstance(scenario, Scenario):
        raise TypeError(f"generate() must return sdk.Scenario, got {type(scenario).__name__}")
    out = {"fingerprint": scenario.fingerprint(), "truth": scenario.truth, "meta": scenario.meta, "generate_ms": generate_ms}
    if params.get("with_scenario"):
        out["scenario"] = scenario.to_dict()
    return out


def solution(params: dict[str, Any]) -> list[dict[str, Any]]:
    env = _env()
    scenario = _scenario(int(params["seed"]))
    solve = env.reference_solution if params["which"] == "reference" else env.capability_skipping_solution
    return [t.to_json() for t in solve(scenario)]


def episode(params: dict[str, Any]) -> dict[str, Any]:
    """Play turns (or one of the two solutions) from ``reset(seed)``; reset and every step are timed.

    ``fresh``: generate the scenario anew instead of reading the cache. ``templates``: the turns may name
    scenario values (see :mod:`trace_env.scenario_values`); the resolved turns come back as ``actions``.
    """
    env = _env()
    seed = int(params["seed"])
    if "policy" in params:
        turns: list[Any] = solution({"seed": seed, "which": params["policy"]})
    else:
        turns = params.get("turns", [])
    scenario = env.generate(seed) if params.get("fresh") else _scenario(seed)
    if not isinstance(scenario, Scenario):
        raise TypeError(f"generate() must return sdk.Scenario, got {type(scenario).__name__}")
    if params.get("fresh"):
        scenario = gate_probe.fresh(scenario)
    result = gate_probe.play(env, seed, turns if params.get("templates") else [_action(t) for t in turns], scenario,
                             templates=bool(params.get("templates")))
    if not params.get("with_messages", True):
        result.pop("messages")
    return result


def episodes(params: dict[str, Any]) -> list[dict[str, Any]]:
    """Several :func:`episode` calls in one round trip (the gate's mutants and policy mixtures)."""
    shared = {"with_messages": params.get("with_messages", False)}
    return [episode({**shared, **item}) for item in params.get("episodes", [])]


def survey(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The gate's pass over seeds (see :func:`trace_env.gate_probe.survey`); each scenario is cached too."""
    return gate_probe.survey(
        _env(), [int(s) for s in params["seeds"]], int(params.get("parrot_seeds", 0)),
        float(params.get("deadline_s", 60.0)), remember=_remember,
        masked_seeds=None if params.get("masked_seeds") is None else int(params["masked_seeds"]),
    )


def memory(params: dict[str, Any]) -> dict[str, Any]:
    """Memory kept per episode, over ``episodes`` repeats of one episode (see gate_probe.memory_probe)."""
    seed = int(params["seed"])
    turns = [_action(t) for t in params.get("turns", [])]
    return gate_probe.memory_probe(_env(), seed, turns, _scenario, int(params.get("episodes", 10)))


def reset(params: dict[str, Any]) -> dict[str, Any]:
    runner = EpisodeRunner(_env())
    _state["runner"] = runner
    seed = int(params["seed"])
    return runner.reset(seed, _scenario(seed), params.get("max_steps")).to_dict()


def step(params: dict[str, Any]) -> dict[str, Any]:
    runner = _state.get("runner")
    if runner is None:
        raise RuntimeError("call 'reset' before 'step'")
    return runner.step(_action(params.get("action"))).to_dict()


def truncate(params: dict[str, Any]) -> dict[str, Any]:
    """End the running episode from outside and grade the state reached (see EpisodeRunner.truncate)."""
    runner = _state.get("runner")
    if runner is None:
        raise RuntimeError("call 'reset' before 'truncate'")
    return runner.truncate().to_dict()


METHODS = {
    "load": load, "generate": generate, "solution": solution, "episode": episode, "reset": reset, "step": step,
    "truncate": truncate, "episodes": episodes, "survey": survey, "memory": memory,
}
