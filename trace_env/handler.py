"""RPC methods that host one env inside a sandbox worker (``python -m sandbox.worker trace_env.handler``).

Everything that executes env code lives behind these methods, so the CLI, the validator and the trainer
only ever see JSON. One worker hosts one env: ``load`` first, then any mix of the other calls.

No state survives an episode: the env's module is compiled once at ``load`` and executed into a new module
object, with a new env instance, at every ``reset`` and before every call only the gate makes (``generate``,
the two solutions, ``derive_truth``; :class:`trace_env.gate_calls.GateEnv`). Class attributes, module globals and instance
attributes start clean each episode, in the gate and in training alike, so an env cannot count episodes,
notice consecutive seeds or remember that the gate called a solution. What env code could still reach
beyond its own module (the SDK, kits, stdlib modules, builtins) does not outlive the episode's process (below)
and, for rebinding between calls, is caught by the worker's integrity check (``sandbox.integrity``; the lint is a
quality filter and refuses none of it); see ARCHITECTURE.md, "No state survives an episode".

Under the shim's fresh processes (``sandbox.template``) each episode and each other call runs in a process of its
own, forked from one that only ran :func:`prepare`. The calls only the gate makes are in
:mod:`trace_env.gate_calls`: a probe (``survey``, ``episode``, ``timing``, ...) runs no env code at all, and asks
every env method it needs of a fresh episode or one-shot process, so env code that takes over its interpreter can
answer the env's own functions but never write the gate's figures. This module keeps what both sides use: the
scenario cache, ``load``, and the calls training makes.
"""

from __future__ import annotations

import inspect
import json
import sys
import types
from collections import OrderedDict
from typing import Any

from trace_env import gate_calls, gate_probe, gate_remote
from trace_env import sdk as _sdk
from trace_env.loader import EnvProgram
from trace_env.engine import EpisodeRunner, warm_shipped_targets
from trace_env.sdk import Scenario, TaskEnv, Turn

_state: dict[str, Any] = {}
_SCENARIO_CACHE_SIZE = 256
_SCENARIO_CACHE_CHARS = 32 * 2**20
"""The cache holds at most this much scenario text: its size is the env's choice, and a worker that serves a
whole training run meets far more seeds than the gate's memory probe replays."""
_scenarios: OrderedDict[int, str] = OrderedDict()
_cached_chars = [0]
_fingerprints: dict[int, tuple[str, str]] = {}  # seed -> (the cached text, its scenario's fingerprint)


def _scenario(seed: int) -> Scenario:
    """``generate(seed)``, memoised as JSON so each caller gets a fresh copy.

    Validation asks for the same seed's scenario several times (solution, episode, reset). The ``generate``
    method itself is never memoised: the determinism check must see two real calls.
    """
    text = _scenarios.get(seed)
    if text is None:
        if _remote():  # asked of a fresh process: only its JSON comes here
            text = json.dumps(gate_remote.scenario_from(gate_remote.RemoteEnv().generated(seed)["scenario"]).to_dict())
        else:
            text = json.dumps(_env().generate(seed).to_dict())
        _remember(seed, text)
    else:
        _scenarios.move_to_end(seed)
    scenario = Scenario(**json.loads(text))
    # Every episode of a seed starts from this text: its hash is worked out once, and the episode's private
    # copy of the state is the text parsed again (not a dump, a parse and a comparison of the state each time).
    known = _fingerprints.get(seed)
    if known is None or known[0] != text:
        known = (text, scenario.fingerprint())
        _fingerprints[seed] = known
    object.__setattr__(scenario, "_known_fingerprint", known[1])
    object.__setattr__(scenario, "_state_again", lambda: json.loads(text)["state"])
    return scenario


def _env() -> TaskEnv:
    """The current env; in a process forked from the template (which runs no env code), a fresh one."""
    env = _state.get("env")
    if env is None:
        if _state.get("program") is None:
            raise RuntimeError("no env loaded in this worker: call 'load' first")
        env = _fresh_env()
    return env


def _fresh_env() -> TaskEnv:
    """A new env from a newly executed module (see the module docstring); it becomes the current env."""
    program = _state.get("program")
    if program is None:
        raise RuntimeError("no env loaded in this worker: call 'load' first")
    env = program.fresh()
    _state["env"] = env
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


def prepare(params: dict[str, Any]) -> dict[str, Any]:
    """Compile the env source and import the kits it names, executing none of it: what the template process
    (``sandbox.template``) does at ``load``, so every process forked from it starts with the program ready."""
    install_legacy_sdk_alias()
    _state["program"] = EnvProgram(params["source"], module_name=params.get("module_name"))
    _state["prepared"] = (params["source"], params.get("module_name"))
    warm_shipped_targets()
    return {"prepared": True}


def load(params: dict[str, Any]) -> dict[str, Any]:
    install_legacy_sdk_alias()
    if _state.get("prepared") == (params["source"], params.get("module_name")):
        program = _state["program"]  # compiled in the template process this one was forked from
    else:
        program = EnvProgram(params["source"], module_name=params.get("module_name"))
        _state["prepared"] = (params["source"], params.get("module_name"))
    env = program.fresh()
    _state["program"] = program
    _state["env"] = env
    _state["runner"] = None
    _scenarios.clear()
    _fingerprints.clear()
    _cached_chars[0] = 0
    info = {
        "capability": env.capability,
        "target": env.target,
        "description": env.description,
        "tool_names": list(env.tool_names),
        "tools": env.tools(),
        "max_steps": env.max_steps,
        "write_tools": sorted(env.write_tools),
        "terminal_tools": sorted(env.terminal_tools),
        "reward_range": _declared_range(env),
        "tool_domain": env.tool_domain or None,
    }
    if env.tool_domain:
        info["signatures"] = _signatures(env)
    return info


def _declared_range(env: TaskEnv) -> Any:
    """``reward_range`` as declared (two numbers), or its repr when it is not two numbers (the gate says so)."""
    value = env.reward_range
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
        return [float(value[0]), float(value[1])]
    return repr(value)[:200]


def _signatures(env: TaskEnv) -> dict[str, Any]:
    """The parameters of each exposed tool method, for an env with a tool domain of its own (the gate compares
    them with the declared schemas): names, and which have no default (required)."""
    out: dict[str, Any] = {}
    for name in env.tool_names:
        method = env.tool_method(name)
        if method is None:
            out[name] = None
            continue
        try:
            parameters = list(inspect.signature(method).parameters.values())[1:]  # the first is the state
        except (TypeError, ValueError):
            out[name] = None
            continue
        out[name] = {
            "names": [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)],
            "required": [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty],
            "extra": any(p.kind == p.VAR_KEYWORD for p in parameters),
        }
    return out


def _remember(seed: int, scenario_json: str) -> None:
    """Cache a scenario's JSON, the least recently used leaving first, within both bounds (count and text)."""
    _forget(seed)
    _scenarios[seed] = scenario_json
    _cached_chars[0] += len(scenario_json)
    while len(_scenarios) > _SCENARIO_CACHE_SIZE or (_cached_chars[0] > _SCENARIO_CACHE_CHARS and len(_scenarios) > 1):
        gone, text = _scenarios.popitem(last=False)
        _cached_chars[0] -= len(text)
        _fingerprints.pop(gone, None)


def _forget(seed: int) -> None:
    _fingerprints.pop(seed, None)
    text = _scenarios.pop(seed, None)
    if text is not None:
        _cached_chars[0] -= len(text)


def attach_episodes(call: Any) -> None:
    """Set by the template's env processes: under the shim's fresh processes a probe call asks every env method
    it needs of a fresh process through ``call(method, params)`` (see :mod:`trace_env.gate_remote`)."""
    gate_remote.attach(call)


def _remote() -> bool:
    """Whether this process serves a probe call under the shim's fresh processes: then it runs no env code."""
    return gate_remote.attached() and bool(_state.get("probing"))


def record(params: dict[str, Any]) -> dict[str, Any]:
    """The episode this process played, for the gate once it has ended: scenario, state, transcript, tool
    log (the scenario only unless ``with_scenario`` is false). Asked of an episode process only after its last
    reply; the process is ended right after."""
    runner = _state.get("runner")
    if runner is None:
        raise RuntimeError("call 'reset' before 'record'")
    episode = runner.episode
    scenario = {"scenario": episode.scenario.to_dict()} if params.get("with_scenario", True) else {}
    return {**scenario, "state": episode.state, "messages": episode.messages,
            "tool_log": [vars(r) for r in episode.tool_log], "steps": episode.steps,
            "user_turns": episode.user_turns, "ended_by": episode.ended_by, "env_errors": list(runner.env_errors),
            "reset_ms": _timings["reset_ms"], "step_ms": list(_timings["step_ms"])}


def usage(params: dict[str, Any]) -> dict[str, Any]:
    """CPU seconds this worker has used (the gate reports its cost independent of the machine's load)."""
    import time

    return {"cpu_s": round(time.process_time(), 3)}


_timings: dict[str, Any] = {"reset_ms": 0.0, "step_ms": []}
"""The env's own time on this episode's reset and steps (gate_probe.Stopwatch), timed alike for every caller;
the gate reads them with the ``record`` (the process's start is the platform's cost, not the env's)."""


def reset(params: dict[str, Any]) -> dict[str, Any]:
    """A new episode on a fresh env (a newly executed module): nothing of an earlier episode survives."""
    watch = gate_probe.Stopwatch()
    runner = EpisodeRunner(_fresh_env())
    _state["runner"] = runner
    seed = int(params["seed"])
    result = runner.reset(seed, _scenario(seed), params.get("max_steps")).to_dict()
    _timings.update(reset_ms=watch.ms(), step_ms=[])
    return result


def step(params: dict[str, Any]) -> dict[str, Any]:
    runner = _state.get("runner")
    if runner is None:
        raise RuntimeError("call 'reset' before 'step'")
    watch = gate_probe.Stopwatch()
    result = runner.step(_action(params.get("action"))).to_dict()
    _timings["step_ms"].append(watch.ms())
    return result


def truncate(params: dict[str, Any]) -> dict[str, Any]:
    """End the running episode from outside and grade the state reached (see EpisodeRunner.truncate)."""
    runner = _state.get("runner")
    if runner is None:
        raise RuntimeError("call 'reset' before 'truncate'")
    return runner.truncate().to_dict()


gate_calls.bind(sys.modules[__name__])  # the gate's calls (probes, one-shots) run on this module's core

METHODS = {"load": load, "reset": reset, "step": step, "truncate": truncate, "record": record, "usage": usage,
           **gate_calls.METHODS}
