"""RPC methods only the gate calls, inside a sandbox worker: its probes and the one-shots they ask of fresh processes.

Training calls ``load``, ``reset``, ``step`` and ``truncate`` (:mod:`trace_env.handler`). The gate also calls the
probes here: ``survey``, ``episode``/``episodes``, ``timing``, ``fingerprints``, ``memory``, ``generate``,
``solution``. Under the shim's fresh processes (``sandbox.template``) a probe runs no env code: it plays episodes
through :class:`trace_env.gate_remote.RemoteDriver`, each in a fresh episode process that sees what training sends
it, and asks every other env method of a fresh one-shot process (the ``env_*`` methods below, which do run env
code, each on a freshly executed module). Without fresh processes (one process per worker) the probes run env code
in their own process, each gate-only method on a fresh env (:class:`GateEnv`).

The episode core (the scenario cache, the current env, ``reset``/``step``) is the handler's; the handler's
``METHODS`` takes this module's :data:`METHODS`. Stdlib only.
"""

from __future__ import annotations

import json
from typing import Any

from trace_env import gate_probe, gate_remote, gate_world
from trace_env.sdk import Episode, Scenario

_h: Any = None
"""The handler module (its episode core), given by :func:`bind` when the handler imports this one: the handler
serves these methods, so this module does not import it back."""


def bind(handler: Any) -> None:
    global _h
    _h = handler

GATE_ONLY = frozenset({"generate", "reference_solution", "capability_skipping_solution", "derive_truth"})


class GateEnv:
    """The env as the gate's probes see it in this process (one process per worker; under the fresh processes a
    probe call uses ``gate_remote.RemoteEnv`` instead): every gate-only method is taken from a fresh env, so what such a
    call leaves behind (a flag "the gate called me") is gone before the next episode; anything else is read
    from the current env."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_h._fresh_env() if name in GATE_ONLY else _h._env(), name)


GATE_ENV: Any = GateEnv()


def generate(params: dict[str, Any]) -> dict[str, Any]:
    """A real (uncached) ``generate(seed)``, timed (see gate_probe.Stopwatch); the whole scenario on request."""
    if _h._remote():
        return gate_remote.RemoteEnv().generated(int(params["seed"]), bool(params.get("with_scenario")))
    return env_generate(params)


def _timed_generate(seed: int) -> tuple[Scenario, float]:
    env = _h._fresh_env()
    watch = gate_probe.Stopwatch()
    scenario = env.generate(seed)
    generate_ms = watch.ms()
    if not isinstance(scenario, Scenario):
        raise TypeError(f"generate() must return sdk.Scenario, got {type(scenario).__name__}")
    return scenario, generate_ms


def env_generate(params: dict[str, Any]) -> dict[str, Any]:
    """:func:`generate` run here (a one-shot process's, or any call's outside the gate's fresh processes)."""
    scenario, generate_ms = _timed_generate(int(params["seed"]))
    out = {"fingerprint": scenario.fingerprint(), "truth": scenario.truth, "meta": scenario.meta, "generate_ms": generate_ms}
    if params.get("with_scenario"):
        out["scenario"] = scenario.to_dict()
    return out


def solution(params: dict[str, Any]) -> list[dict[str, Any]]:
    scenario = _h._scenario(int(params["seed"]))
    if _h._remote():
        turns = gate_remote.call("env_solution", {"scenario": scenario.to_dict(), "which": params["which"]})
        if type(turns) is not list:
            raise gate_remote.BadAnswer("a solution is not a list of turns")
        return turns
    return _solve(scenario, params["which"])


def _solve(scenario: Scenario, which: str) -> list[dict[str, Any]]:
    env = _h._fresh_env()
    solve = env.reference_solution if which == "reference" else env.capability_skipping_solution
    return [t.to_json() for t in solve(scenario)]


# --- the one-shot calls: what a probe process asks of a fresh process (trace_env.gate_remote) -------------


def env_solution(params: dict[str, Any]) -> list[dict[str, Any]]:
    return _solve(gate_remote.scenario_from(params["scenario"]), str(params["which"]))


def env_seed(params: dict[str, Any]) -> dict[str, Any]:
    return gate_remote.seed_answers(params, _h._fresh_env, _timed_generate, _solve, lambda: env_describe({}))


def env_initial_state(params: dict[str, Any]) -> Any:
    return _h._fresh_env().initial_state(gate_remote.scenario_from(params["scenario"]))


def env_derive_truth(params: dict[str, Any]) -> Any:
    return _h._fresh_env().derive_truth(gate_remote.scenario_from(params["scenario"]), params["state"])


def env_derive_truths(params: dict[str, Any]) -> list[dict[str, Any]]:
    return gate_remote.derive_each(_h._fresh_env, lambda: gate_remote.scenario_from(params["scenario"]), params["states"])


def env_describe(params: dict[str, Any]) -> dict[str, Any]:
    env = _h._fresh_env()
    return {"target": env.target, "tool_domain": env.tool_domain or None, "write_tools": sorted(env.write_tools)}


def env_truth_marks(params: dict[str, Any]) -> dict[str, Any]:
    return gate_world.truth_marks(_h._fresh_env(), int(params["seed"]))


class _Driver:
    """The gate's episodes through this module's own ``reset`` and ``step``: the calls training makes (in this
    process; under the shim's fresh processes ``gate_remote.RemoteDriver`` plays them each in a process of its own)."""

    def reset(self, seed: int) -> dict[str, Any]:
        return _h.reset({"seed": seed})

    def scenario(self, seed: int) -> Scenario:
        return _h._state["runner"].episode.scenario

    def step(self, action: Any) -> dict[str, Any]:
        return _h.step({"action": action})

    def finish(self) -> dict[str, Any]:
        """The agent stopped before the episode ended: graded through ``truncate``, what training calls when
        it caps turns, so the env sees the same episode (``ended_by`` is ``max_steps``) in both."""
        return _h.truncate({})["info"]["reward_detail"]

    def episode(self) -> Episode:
        return _h._state["runner"].episode

    def env_errors(self) -> list[dict[str, str]]:
        return _h._state["runner"].env_errors


DRIVER = _Driver()


def _probe(method: Any) -> Any:
    """A probe call (the gate's): while it runs, env methods are asked of fresh processes where that is possible."""
    def probing(params: dict[str, Any]) -> Any:
        before = _h._state.get("probing")
        _h._state["probing"] = True
        try:
            return method(params)
        finally:
            _h._state["probing"] = before

    probing.__name__ = probing.__qualname__ = method.__name__
    return probing


def _Generated(seed: int) -> Any:  # noqa: N802 - the lazily generated scenario of a remote episode's record
    return gate_remote._Generated(seed, _h._scenario)


def _gate_env() -> Any:
    if _h._remote():
        env = _h._state.get("remote_env")
        if env is None:
            env = _h._state["remote_env"] = gate_remote.RemoteEnv()
        return env
    return GATE_ENV


def _driver(uncached: bool = False) -> Any:
    if _h._remote():
        return gate_remote.RemoteDriver(_h._scenario)  # every reset is a fresh process: nothing is cached there
    return _UncachedDriver() if uncached else DRIVER


def episode(params: dict[str, Any]) -> dict[str, Any]:
    """Play turns (or one of the two solutions) from ``reset(seed)`` through the driver; reset and every step
    are timed.

    ``fresh``: generate the scenario anew instead of reading the cache. ``templates``: the turns may name
    scenario values (see :mod:`trace_env.scenario_values`); the resolved turns come back as ``actions``.
    ``truth_check``: also recompute the truth from the final state (``derive_truth``, where declared).
    ``digest_state``: also return a digest of the final state.
    """
    seed = int(params["seed"])
    if "policy" in params:
        turns: list[Any] = solution({"seed": seed, "which": params["policy"]})
    else:
        turns = params.get("turns", [])
    if params.get("fresh"):
        _h._forget(seed)
    if params.get("templates") and _h._remote():
        _h._scenario(seed)  # the values' scenario is asked for before the episode process starts, not during it
    driver = _driver()
    result = gate_probe.play(driver, seed, turns, templates=bool(params.get("templates")), digest_state=bool(params.get("digest_state")))
    if params.get("truth_check"):
        result["truth_check"] = gate_world.truth_check(_gate_env(), _h._scenario(seed), driver.episode().state)
    if not params.get("with_messages", True):
        result.pop("messages")
    return result


def episodes(params: dict[str, Any]) -> list[dict[str, Any]]:
    """Several :func:`episode` calls in one round trip (the gate's mutants, exploits and policy mixtures)."""
    shared = {"with_messages": params.get("with_messages", False)}
    return [episode({**shared, **item}) for item in params.get("episodes", [])]


def survey(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The gate's pass over seeds (see :func:`trace_env.gate_probe.survey`); each scenario is cached too."""
    def seeds(key: str) -> frozenset[int]:
        return frozenset(int(s) for s in params.get(key) or [])

    env = gate_remote.RemoteEnv([int(s) for s in params["seeds"]], seeds("world")) if _h._remote() else GATE_ENV
    return gate_probe.survey(
        env, _driver(), [int(s) for s in params["seeds"]], float(params.get("deadline_s", 60.0)), remember=_h._remember,
        parrot=seeds("parrot"), masked=None if params.get("masked") is None else seeds("masked"), world=seeds("world"),
    )


def timing(params: dict[str, Any]) -> list[dict[str, Any]]:
    """``generate`` timed uncached on many seeds, with an early stop (see gate_probe.generate_times)."""
    return gate_probe.generate_times(_gate_env(), [int(s) for s in params["seeds"]], float(params.get("deadline_s", 2.0)),
                                     float(params.get("budget_ms", 200.0)))


def fingerprints(params: dict[str, Any]) -> list[dict[str, Any]]:
    """``generate`` on many seeds, each on a fresh env as a training reset makes it, hashed: two workers with
    different hash seeds must agree on every seed (the determinism sweep). Stops at the deadline."""
    import hashlib
    import time

    started, out = time.perf_counter(), []
    for seed in [int(s) for s in params["seeds"]]:
        if out and time.perf_counter() - started > float(params.get("deadline_s", 1.0)):
            break
        try:
            if _h._remote():  # the scenario's JSON, from a fresh process
                text = json.dumps(gate_remote.RemoteEnv().generated(seed)["scenario"], sort_keys=True, default=str)
            else:
                scenario = _h._fresh_env().generate(seed)
                if not isinstance(scenario, Scenario):
                    raise TypeError(type(scenario).__name__)
                text = json.dumps(scenario.to_dict(), sort_keys=True, default=str)
        except Exception as exc:  # a raising seed is the survey's finding, not this probe's
            out.append({"seed": seed, "error": type(exc).__name__[:200]})
            continue
        out.append({"seed": seed, "fingerprint": hashlib.sha256(text.encode()).hexdigest()})
    return out


class _UncachedDriver(_Driver):
    """The driver with ``generate`` run at every reset (the scenario cache skipped): what a training worker
    does on a seed it has not seen, so the memory probe measures whole episodes, generate included."""

    def reset(self, seed: int) -> dict[str, Any]:
        _h._forget(seed)
        return _h.reset({"seed": seed})


def memory(params: dict[str, Any]) -> dict[str, Any]:
    """Memory kept per episode over repeats of several whole episodes (generate included) in this worker
    (see gate_probe.memory_probe)."""
    plan = [(int(item["seed"]), list(item.get("turns", []))) for item in params.get("episodes", [])]
    return gate_probe.memory_probe(_driver(uncached=True), plan, int(params.get("rounds", 6)))


#: The gate's methods, by RPC name: probes run with ``probing`` set (env methods asked of fresh processes).
METHODS = {
    **{m.__name__: _probe(m) for m in (generate, solution, episode, episodes, survey, memory, timing, fingerprints)},
    **{m.__name__: m for m in (env_generate, env_solution, env_seed, env_initial_state, env_derive_truth,
                               env_derive_truths, env_describe, env_truth_marks)},
}
