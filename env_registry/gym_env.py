"""The Gymnasium face of a registered env: text in, text out, reward at the end.

``gym.make("trace/<capability>-v<N>")`` builds a :class:`TraceEnv` over the stored env version. Actions are
one assistant turn: raw model text (Hermes/Qwen ``<tool_call>`` blocks and OpenAI JSON are parsed) or an
OpenAI message dict with ``tool_calls``. Observations are the new messages as text; ``info["messages"]``
(at reset and at the end) and ``info["new_messages"]`` carry the structured OpenAI-format messages that
chat templates need, and ``info["tools"]`` the tool schemas.

Episode length: ``gym.make(id, max_steps=N)`` sets the env's own turn limit (the worker truncates and
grades), and ``env.spec.max_episode_steps`` reports the limit in force. An episode cut short by a wrapper
(``gym.make(id, max_episode_steps=M)`` adds a ``TimeLimit``) is graded by :class:`GradeOnTruncation`;
code that caps turns itself calls :meth:`TraceEnv.truncate`. Either way the last step carries the reward
of the state reached, with ``truncated=True``.

Reward audit: a share of the episodes (``gym.make(id, audit=share)``, else ``$TRACE_FACTORY_AUDIT_SHARE``, else
:data:`env_registry.audit.DEFAULT_SHARE`; 0 turns it off) is replayed on a fresh sandbox worker when it ends, and
an episode the fresh worker does not reproduce raises :class:`env_registry.audit.AuditMismatch` from the step
that ended it.

A ``TraceEnv`` pickles as its stored env (source and manifest, no machine path needed) and reopens a
sandbox worker at its next ``reset`` in whatever process unpickles it (Ray, multiprocessing).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
from gymnasium.utils import RecordConstructorArgs

from env_registry.spaces import AnyText

if TYPE_CHECKING:
    from gymnasium.envs.registration import EnvSpec

    from env_registry.execution import Runner
    from env_registry.registry import StoredEnv

MAX_OBSERVATION_CHARS = 2_000_000
MAX_ACTION_CHARS = 200_000
MAX_TURN_LIMIT = 10_000


def _turn_limit(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TURN_LIMIT:
        raise ValueError(f"max_steps must be an integer from 1 to {MAX_TURN_LIMIT}, got {value!r}")
    return value


class TraceEnv(gym.Env[str, str]):
    """One synthetic training env for one capability. ``runner`` is an EpisodeRunner or a SandboxedRunner."""

    metadata = {"render_modes": ["ansi"]}
    _spec: "EnvSpec | None" = None

    def __init__(
        self,
        capability: str | None = None,
        version: int | None = None,
        registry_root: str | Path | None = None,
        runner: "Runner | None" = None,
        render_mode: str | None = None,
        sandbox: str | None = None,
        max_steps: int | None = None,
        audit: float | None = None,
    ) -> None:
        self.max_steps = _turn_limit(max_steps)
        from env_registry.audit import share_from_env

        self.audit_share = share_from_env(audit)
        self._auditor: Any = None
        self._episode: Any = None
        self.sandbox = sandbox
        self._stored: StoredEnv | None = None
        if runner is None:
            if capability is None:
                raise ValueError("TraceEnv needs a capability (from the registry) or a runner")
            from env_registry.execution import open_runner
            from env_registry.registration import registered_root
            from env_registry.registry import Registry

            root = registry_root if registry_root is not None else registered_root(capability, version)
            self._stored = Registry(root).get(capability, version)
            self._registry_root = str(root)
            runner = open_runner(self._stored, sandbox)
        self._runner: Runner | None = runner
        self.capability = runner.capability
        declared = self._stored.manifest.max_steps if self._stored is not None else getattr(runner, "max_steps", None)
        self.turn_limit: int | None = self.max_steps or (declared if isinstance(declared, int) else None)
        self.observation_space = AnyText(MAX_OBSERVATION_CHARS)
        self.action_space = AnyText(MAX_ACTION_CHARS)
        self.render_mode = render_mode
        self._last_observation = ""

    # --- the spec reports the turn limit in force -------------------------------------------------
    @property  # type: ignore[override]
    def spec(self) -> "EnvSpec | None":
        return self._spec

    @spec.setter
    def spec(self, value: "EnvSpec | None") -> None:
        """``gym.make`` sets the spec with ``max_episode_steps=None``; this env enforces its own limit, so say it."""
        if value is not None and value.max_episode_steps is None and self.turn_limit is not None:
            value = dataclasses.replace(value, max_episode_steps=self.turn_limit)
        self._spec = value

    # --- the worker: opened at construction, and again after unpickling -----------------------------
    @property
    def runner(self) -> "Runner":
        if self._runner is None:
            from env_registry.execution import open_runner

            assert self._stored is not None
            self._runner = open_runner(self._stored, self.sandbox)
        return self._runner

    def __getstate__(self) -> dict[str, Any]:
        if self._stored is None:
            raise TypeError(
                f"this {type(self).__name__} was built around a runner object and cannot be pickled; "
                "make it with gym.make('trace/<capability>-v<N>') to get a picklable env"
            )
        state = self.__dict__.copy()
        state["_runner"] = None  # a sandbox worker is a process: the unpickled env starts its own
        state["_auditor"] = state["_episode"] = None  # the audit holds a lock; an episode under way does not travel
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update({"audit_share": 0.0, "_auditor": None, "_episode": None, **state})

    # --- Gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(0, 2**31 - 1))
        result = self.runner.reset(seed, max_steps=self.max_steps) if self.max_steps else self.runner.reset(seed)
        self._last_observation = result.observation
        self._start_record(int(seed), result.observation)
        return result.observation, result.info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        from env_registry.hosted import SandboxedRunner

        # a sandboxed runner encodes the action once and refuses what cannot be encoded; in process, check here
        result = self.runner.step(action if isinstance(self.runner, SandboxedRunner) else _sendable(action))
        self._last_observation = result.observation
        self._record(action, result.observation, float(result.reward), result.terminated, result.truncated)
        return result.observation, float(result.reward), result.terminated, result.truncated, result.info

    def truncate(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """End the running episode from outside (a turn cap of your own): the ``step`` tuple of its last turn,
        with the reward of the state reached, ``truncated=True`` and the end-of-episode ``info`` keys."""
        result = self.runner.truncate()
        if self._episode is not None:
            self._episode.cut = True
        self._record(None, result.observation, float(result.reward), False, True)
        return result.observation, float(result.reward), False, True, result.info

    # --- the reward audit (env_registry.audit) ------------------------------------------------------
    def _start_record(self, seed: int, observation: str) -> None:
        """Record the episode when it can be audited: a stored env (a fresh worker can be opened) and a share."""
        from env_registry.audit import Episode

        self._episode = Episode(seed, observation) if self.audit_share > 0 and self._stored is not None else None

    def _record(self, action: Any, observation: str, reward: float, terminated: bool, truncated: bool) -> None:
        """Add a step; at the episode's end, offer it to the audit (which raises ``AuditMismatch``)."""
        from env_registry.audit import Auditor, Step

        episode = self._episode
        if episode is None:
            return
        episode.actions.append(action)
        episode.steps.append(Step(str(observation), reward, bool(terminated), bool(truncated)))
        if not (terminated or truncated):
            return
        self._episode = None
        if self._auditor is None:
            self._auditor = Auditor(self._fresh_env, self.audit_share, self._identity(), background=False)
        self._auditor.offer(episode)

    def _fresh_env(self) -> "TraceEnv":
        from env_registry.execution import open_runner

        assert self._stored is not None
        return TraceEnv(runner=open_runner(self._stored, self.sandbox), max_steps=self.max_steps, audit=0.0)

    def _identity(self) -> dict[str, Any]:
        assert self._stored is not None
        manifest = self._stored.manifest
        return {"env_id": manifest.gym_id, "registry": getattr(self, "_registry_root", None),
                "capability": manifest.capability, "version": manifest.version, "sandbox": self.sandbox,
                "max_steps": self.max_steps}

    def close(self) -> None:
        """Stops the sandbox worker that hosts the env code, if there is one."""
        if self._runner is not None:
            self._runner.close()
        super().close()

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last_observation
        return None


class GradeOnTruncation(gym.Wrapper[str, str, str, str], RecordConstructorArgs):
    """Registered as an additional wrapper of every ``trace/`` env, outside ``gym.make``'s ``TimeLimit``.

    When a wrapper below it truncates an episode the env itself has not ended (its ``info`` has no
    ``ended_by``), the env grades the state reached: the step's reward becomes that grade and ``info``
    gains ``reward_components``, ``reward_detail``, ``ended_by`` and ``messages`` as at a natural end.
    """

    def __init__(self, env: gym.Env[str, str]) -> None:
        RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        if truncated and not terminated and "ended_by" not in info:
            final = self.env.unwrapped.truncate()  # type: ignore[attr-defined]
            reward = final[1]
            info = {**info, **{k: v for k, v in final[4].items() if k not in ("steps", "new_messages")}}
        return observation, reward, terminated, truncated, info


def _sendable(action: Any) -> Any:
    """The action, or - when it cannot travel to the env as JSON (a cycle, extreme nesting) - a refused call
    that says so, which the env answers with an error observation. A bad action never raises, sandboxed or not."""
    if action is None or isinstance(action, str):
        return action
    from env_registry.hosted import action_to_json, refused_action

    try:
        json.dumps(action_to_json(action))
    except (TypeError, ValueError, RecursionError) as exc:
        return refused_action(type(exc).__name__)
    return action
