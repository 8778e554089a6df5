"""Host side: a pool of sandboxed Gymnasium envs, kept open for a whole run and stepped in parallel.

Each live episode needs its own env (a sandbox worker hosts one episode at a time), so the pool holds one
env per concurrent rollout, started once and reset (never restarted) for every episode of every
iteration. Env calls are sub-process RPCs, so a thread pool overlaps them. Everything that comes back is
validated before the trainer uses it.

Workers live for the whole run, so their limits are a run's, not one episode's: every env worker, the gate's
included, gets :data:`env_registry.hosted.WORKER_LIMITS` (its CPU-time rlimit is sized for a long-lived
worker), and a call's wall timeout allows for a busy machine; the gate's per-call CPU budget is what keeps
an env's calls cheap. A worker that dies anyway is replaced and its episode replayed from its seed on the
new worker (the env is deterministic - the gate checks it): the first observation must hash the same,
then the episode's actions so far are stepped again and the failed call retried. Only an episode whose
replays keep failing ends as an ``infrastructure_error``. A call that stalled (``env_registry.hosted.EnvStalled``:
the env's own fault, past its step deadline) is not replayed: it would stall again; the episode ends there.

Every episode that ends is offered to the reward audit (:mod:`env_registry.audit`): a share of them is replayed
on a fresh worker, on a thread of its own while the trainer goes on; :meth:`EnvPool.audit_check` raises
:class:`~env_registry.audit.AuditMismatch` when a replay paid otherwise.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from pydantic import ValidationError

from env_registry.audit import Auditor, Step
from env_registry.audit import Episode as AuditedEpisode
from env_registry.hosted import EnvStalled
from sandbox import SandboxLimits, WorkerBadReply
from schemas.errors import validation_message
from schemas.wire import CheckedInfo, StepInfo
from trainer.errors import TrainError


@dataclass(frozen=True)
class EnvReply:
    """An env's reset/step answer as the trainer reads it: the step's reward and flags, and its ``info`` as the
    wall's :class:`StepInfo` (checked once, on the host, as the reply crossed the wall). ``reply.messages``,
    ``reply.tools``, ``reply.scenario_hash``... read the checked info."""

    info: StepInfo
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False

    def __getattr__(self, name: str) -> Any:  # only for names not above: the info's fields
        return getattr(self.info, name)


_SOLUTION = {"reference": "reference", "skipping": "capability-skipping"}
"""How an error names the env's solution that was played."""


class ReplayMismatch(Exception):
    """A replacement worker did not reproduce an episode's scenario: the episode cannot be replayed."""


def _describe(exc: BaseException) -> str:
    """One line naming what failed, with the worker's last words (stderr tail) when it has any."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}"


@dataclass
class EnvOutcome:
    """One env answer, or the one-line reason there is none (the episode then ends as an infra error)."""

    reply: EnvReply | None
    error: str | None = None


def _checked(reward: float, terminated: bool, truncated: bool, info: dict[str, Any]) -> EnvOutcome:
    """The answer as an :class:`EnvReply`. A sandboxed env's ``info`` was checked at the wall (a
    :class:`CheckedInfo`): its checked part is reused as it is; any other ``info`` is validated here."""
    checked = info.checked if isinstance(info, CheckedInfo) else None
    if checked is None:
        try:
            checked = StepInfo.model_validate(info)
        except ValidationError as exc:
            return EnvOutcome(None, f"the env sent a malformed answer ({validation_message(exc, limit=3)})")
    try:
        value = float(reward)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        return EnvOutcome(None, f"the env sent a malformed answer (reward: not a finite number (got {reward!r}))")
    return EnvOutcome(EnvReply(checked, value, bool(terminated), bool(truncated)))


@dataclass
class _Episode:
    """What a slot's episode has done since its reset: enough to replay it on a fresh worker."""

    seed: int
    scenario_hash: str | None = None
    actions: list[Any] = field(default_factory=list)
    record: AuditedEpisode | None = None
    """What the trainer was answered, for the reward audit (None once an answer failed: no verdict)."""


@dataclass
class EnvPool:
    """``size`` envs of one registered id. ``env_seconds`` is the wall time spent waiting on them;
    ``replaced`` counts workers replaced, ``replayed`` episodes replayed on a replacement."""

    env_id: str
    sandbox: str | None = None
    make: Callable[..., Any] | None = None
    workers: int | None = None
    max_steps: int | None = None
    """The episodes' turn limit (``gym.make(id, max_steps=N)``); None: the env's own."""
    limits: SandboxLimits | None = None
    """None: every env worker's limits (the gate's too), ``env_registry.hosted.WORKER_LIMITS``."""
    rpc_timeout_s: float = 300.0
    max_replays: int = 2
    envs: list[Any] = field(default_factory=list)
    env_seconds: float = 0.0
    replaced: int = 0
    replayed: int = 0
    started: int = 0
    reward_range: tuple[float, float] = (0.0, 1.0)
    """The env's declared reward range, as its resets report it (``[0, 1]`` until one has)."""
    audit_share: float | None = None
    """Share of ended episodes replayed on a fresh worker (``env_registry.audit``); None: its default; 0: off."""
    audit_dir: str | None = None
    """Where a mismatching episode is written for its reproduction command (None: the temp dir)."""

    def __post_init__(self) -> None:
        from env_registry.registration import register_all

        register_all()  # envs registered since ``import env_registry`` (e.g. by a build in this process)
        # Sandbox workers die with the *thread* that started them (bwrap sets PR_SET_PDEATHSIG, which is
        # per thread), so a pool thread must outlive the envs it started: executors are only ever added.
        self._executors: list[ThreadPoolExecutor] = []
        self._episodes: dict[int, _Episode] = {}
        self._seed_hashes: dict[int, str | None] = {}
        self.crashes: list[str] = []
        self.leaks = 0
        self.auditor = Auditor(self._make_one, self.audit_share, self._identity(), folder=self.audit_dir)

    def _identity(self) -> dict[str, Any]:
        """What the audit's reproduction command needs to open this env again."""
        import gymnasium as gym

        from env_registry.registration import registered_root

        identity: dict[str, Any] = {"env_id": self.env_id, "sandbox": self.sandbox, "max_steps": self.max_steps}
        try:
            spec = gym.spec(self.env_id).kwargs or {}
            if "capability" in spec:
                identity["registry"] = str(registered_root(spec["capability"], spec.get("version")))
        except Exception:  # an unknown id fails with its own message when an env is made
            pass
        return identity

    def audit_check(self, wait: bool = False) -> None:
        """Raise :class:`AuditMismatch` if a replay on a fresh worker paid otherwise (``wait``: for every replay
        under way first)."""
        self.auditor.check(wait)

    def _make_one(self) -> Any:
        import gymnasium as gym

        try:  # a trace env audits in this pool, not in each env: gym.make(..., audit=0)
            ours = {"audit": 0.0} if "capability" in (gym.spec(self.env_id).kwargs or {}) else {}
        except gym.error.Error:
            ours = {}
        if self.make is not None:
            extra = {**({"sandbox": self.sandbox} if self.sandbox else {}), **({"max_steps": self.max_steps} if self.max_steps else {})}
            return self.make(self.env_id, disable_env_checker=True, **extra, **ours)
        try:
            spec = gym.spec(self.env_id)
        except gym.error.Error as exc:
            raise TrainError(f"{self.env_id}: {exc}; list registered envs with `factory envs list`") from None
        kwargs: dict[str, Any] = {"disable_env_checker": True, **({"max_steps": self.max_steps} if self.max_steps else {}), **ours}
        from env_registry.execution import UNSAFE_ENV_VAR

        if os.environ.get(UNSAFE_ENV_VAR) != "1" and "capability" in (spec.kwargs or {}):
            kwargs["runner"] = self._sandboxed_runner(spec.kwargs)
        elif self.sandbox:
            kwargs["sandbox"] = self.sandbox
        self.started += 1
        return gym.make(self.env_id, **kwargs)

    def _sandboxed_runner(self, spec: dict[str, Any]) -> Any:
        """The env's sandboxed runner, opened as the gate opens its workers, with this pool's RPC timeout."""
        from env_registry.execution import SANDBOX_ENV_VAR
        from env_registry.hosted import SandboxedEnv, SandboxedRunner
        from env_registry.registration import registered_root
        from env_registry.registry import Registry

        root = registered_root(spec["capability"], spec.get("version"))  # the root this id was registered from
        stored = Registry(root).get(spec["capability"], spec.get("version"))
        backend = self.sandbox or os.environ.get(SANDBOX_ENV_VAR, "auto")
        hosted = SandboxedEnv(stored.source, backend=backend, limits=self.limits, rpc_timeout_s=self.rpc_timeout_s,
                              load_timeout_s=self.rpc_timeout_s)
        return SandboxedRunner(hosted)

    def _pool(self, n: int) -> ThreadPoolExecutor:
        wanted = max(1, min(self.workers or n, 64))
        if not self._executors or self._executors[-1]._max_workers < wanted:  # noqa: SLF001
            self._executors.append(ThreadPoolExecutor(max_workers=wanted, thread_name_prefix="trace-env"))
        return self._executors[-1]

    def ensure(self, n: int) -> None:
        """Start envs until there are ``n`` (in parallel: sandbox start-up dominates). A sandbox that fails to
        start is tried again (``max_replays`` times); a slot still empty is started again on its first use.
        Only when no env at all can be started does the run stop, with the first reason."""
        missing = [i for i in range(n) if i >= len(self.envs) or self.envs[i] is None]
        if not missing:
            return
        self.envs.extend([None] * (n - len(self.envs)))
        started = time.perf_counter()

        def start(slot: int) -> str | None:
            failure = None
            for _ in range(self.max_replays + 1):
                try:
                    self.envs[slot] = self._make_one()
                    return None
                except TrainError:
                    raise
                except Exception as exc:  # the sandbox died while starting: another try
                    failure = _describe(exc)
                    self.crashes.append(failure)
            return failure

        failures = [f for f in self._pool(n).map(start, missing) if f]
        self.env_seconds += time.perf_counter() - started
        if failures:
            if all(env is None for env in self.envs):
                raise TrainError(f"{self.env_id}: no sandboxed env could be started ({failures[0]}); "
                                 "check the sandbox with `factory sandbox status`")

    def _call(self, slots: list[int], call: Callable[[int, int], EnvOutcome]) -> list[EnvOutcome]:
        started = time.perf_counter()
        outcomes = list(self._pool(len(slots)).map(lambda index: call(slots[index], index), range(len(slots))))
        self.env_seconds += time.perf_counter() - started
        return outcomes

    def _fresh(self, slot: int) -> Any:
        """The slot's env, started anew if it was retired (from a pool thread, which outlives the worker)."""
        if self.envs[slot] is None:
            self.envs[slot] = self._make_one()
        return self.envs[slot]

    def _reset_on(self, slot: int, episode: _Episode) -> EnvOutcome:
        """Reset the slot's worker to the episode's seed. Its scenario must hash as every other reset of that
        seed in this run did (the gate's determinism and no-leak checks, kept up for a long-lived worker):
        a reused worker that disagrees is replaced by a fresh one, which must agree."""
        for fresh in (False, True):
            observation, info = self._fresh(slot).reset(seed=int(episode.seed))
            outcome = _checked(0.0, False, False, info)
            got = outcome.reply.scenario_hash if outcome.reply is not None else None
            known = episode.scenario_hash or self._seed_hashes.setdefault(episode.seed, got)
            if got is None or known is None or got == known:
                if not episode.actions:  # the episode's own reset, not a replay's: what the trainer is shown
                    episode.record = AuditedEpisode(int(episode.seed), str(observation))
                return outcome
            if fresh:
                raise ReplayMismatch(f"seed {episode.seed} gave another scenario on a fresh worker; the env is not deterministic")
            self.leaks += 1
            self._retire(slot)
        raise AssertionError("unreachable")

    def _replay(self, slot: int, episode: _Episode) -> None:
        """A fresh worker brought to where the slot's episode was: reset to its seed, its actions again."""
        self._reset_on(slot, episode)
        for action in episode.actions:
            self.envs[slot].step(action)
        self.replayed += 1

    def _robust(self, slot: int, attempt: Callable[[], EnvOutcome], episode: _Episode, replay: bool) -> EnvOutcome:
        """``attempt``; when the worker fails, replace it, bring the episode back and try again."""
        failures: list[str] = []
        for tries in range(self.max_replays + 1):
            try:
                if tries and replay:
                    self._replay(slot, episode)
                return attempt()
            except ReplayMismatch as exc:
                return EnvOutcome(None, str(exc))
            except WorkerBadReply as exc:  # a malformed answer, refused at the wall: the worker stays usable
                return EnvOutcome(None, f"the env sent a malformed answer ({' '.join(str(exc).split())[:500]})")
            except EnvStalled as exc:  # the env's own fault, and deterministic: a replay would only stall again
                self.crashes.append(_describe(exc))
                self._retire(slot)  # its worker was killed; the slot's next episode starts a fresh one
                return EnvOutcome(None, str(exc))
            except Exception as exc:  # sandbox died, timed out, or the env raised: this episode only
                failures.append(_describe(exc))
                self.crashes.append(failures[-1])
                self._retire(slot)
        return EnvOutcome(None, failures[-1] + (f" (after {len(failures) - 1} replays)" if len(failures) > 1 else ""))

    def reset(self, slots: list[int], seeds: list[int]) -> list[EnvOutcome]:
        self.ensure(max(slots) + 1 if slots else 0)

        def reset_one(slot: int, index: int) -> EnvOutcome:
            episode = _Episode(int(seeds[index]))
            self._episodes[slot] = episode
            outcome = self._robust(slot, lambda: self._reset_on(slot, episode), episode, replay=False)
            if outcome.reply is not None:
                episode.scenario_hash = outcome.reply.scenario_hash
                if outcome.reply.reward_range is not None:  # checked at the wall with the rest of the reply
                    self.reward_range = outcome.reply.reward_range
            return outcome

        return self._call(slots, reset_one)

    def step(self, slots: list[int], actions: list[Any]) -> list[EnvOutcome]:
        def step_one(slot: int, index: int) -> EnvOutcome:
            episode = self._episodes.get(slot) or _Episode(-1)

            observations: list[str] = []

            def attempt() -> EnvOutcome:
                observation, reward, terminated, truncated, info = self._fresh(slot).step(actions[index])
                observations.append(str(observation))
                return _checked(reward, terminated, truncated, info)

            outcome = self._robust(slot, attempt, episode, replay=episode.seed >= 0)
            episode.actions.append(actions[index])
            self._audit_step(episode, actions[index], outcome, observations[-1] if observations else "")
            return outcome

        return self._call(slots, step_one)

    def _audit_step(self, episode: _Episode, action: Any, outcome: EnvOutcome, observation: str) -> None:
        """Record what the trainer was answered; offer the episode to the audit when it ends."""
        record, reply = episode.record, outcome.reply
        if record is None:
            return
        if reply is None:  # an infrastructure error: the trainer got no reward to check
            episode.record = None
            return
        record.actions.append(action)
        record.steps.append(Step(observation, reply.reward, reply.terminated, reply.truncated))
        if reply.terminated or reply.truncated:
            episode.record = None
            self.auditor.offer(record)

    def _retire(self, slot: int) -> None:
        env, self.envs[slot] = self.envs[slot], None
        if env is None:
            return
        self.replaced += 1
        try:
            env.close()
        except Exception:  # already dead
            pass

    def _note_range(self, value: Any) -> None:
        """Keep a declared range from outside a checked reply (the worker's load reply, an in-process env) if it
        passes the reply check; a malformed one leaves the last known."""
        try:
            checked = StepInfo.model_validate({"reward_range": value}).reward_range
        except ValidationError:
            return
        if checked is not None:
            self.reward_range = checked

    def success_at(self, share: float) -> float:
        """The reward that counts as a success: ``share`` of the way up the env's declared range (a
        ``[-1, 1]`` env succeeds at 0.98 for ``share`` 0.99, not at 0.99 of a ``[0, 1]`` scale)."""
        low, high = self.reward_range
        return low + share * (high - low)

    # --- scenario variants (trainer.seeds) ----------------------------------------------------
    def scenario_variant(self, seed: int) -> str | None:
        """The ``meta["variant"]`` of the scenario ``seed`` generates (None when the env names none); only a short
        name comes back across the wall. A worker that dies is replaced and asked again."""
        return self._on_fresh_worker(f"generating seed {seed} to read its variant", lambda: self._scenario_variant(seed))

    def _scenario_variant(self, seed: int) -> str | None:
        self.ensure(1)
        runner = self.envs[0].unwrapped.runner
        started = time.perf_counter()
        try:
            hosted = getattr(runner, "hosted", None)
            if hosted is not None:
                meta = (hosted.call("generate", {"seed": int(seed)}) or {}).get("meta")
            else:  # TRACE_FACTORY_UNSAFE_INPROCESS=1
                meta = runner.env.generate(int(seed)).meta
        finally:
            self.env_seconds += time.perf_counter() - started
        variant = meta.get("variant") if isinstance(meta, dict) else None
        return variant if isinstance(variant, str) and 0 < len(variant) <= 200 else None

    def _on_fresh_worker(self, what: str, attempt: Callable[[], Any]) -> Any:
        """``attempt`` on worker 0; a worker that dies (or an env that raises) is replaced and it is tried again,
        ``max_replays`` times, then one :class:`TrainError` line names ``what`` failed."""
        for tries in range(self.max_replays + 1):
            try:
                return attempt()
            except (TrainError, ReplayMismatch):
                raise
            except Exception as exc:  # the worker died: a fresh one tries
                if tries == self.max_replays:
                    raise TrainError(f"{self.env_id}: {what}: {_describe(exc)}") from None
                self._retire(0)
        raise AssertionError("unreachable")

    # --- reference solutions (warm start, hints) ---------------------------------------------
    def reference_episode(self, seed: int, policy: Literal["reference", "skipping"] = "reference") -> dict[str, Any]:
        """The env's reference solution (or its capability-skipping one) played from ``seed``: messages, tools
        and reward (validated)."""
        return self._on_fresh_worker(f"{_SOLUTION[policy]} episode for seed {seed}", lambda: self._reference_episode(seed, policy))

    def _reference_episode(self, seed: int, policy: str) -> dict[str, Any]:
        self.ensure(1)
        runner = self.envs[0].unwrapped.runner
        started = time.perf_counter()
        try:
            hosted = getattr(runner, "hosted", None)
            if hosted is not None:  # sandboxed: the worker plays it
                self._note_range(hosted.info.get("reward_range"))
                played = hosted.call("episode", {"seed": int(seed), "policy": policy})
            else:  # TRACE_FACTORY_UNSAFE_INPROCESS=1: the engine is in this process
                from trace_env.engine import run_episode

                env = runner.env
                self._note_range(getattr(env, "reward_range", None))
                solve = env.reference_solution if policy == "reference" else env.capability_skipping_solution
                played = run_episode(env, int(seed), solve(env.generate(int(seed))))
        finally:
            self.env_seconds += time.perf_counter() - started
        outcome = _checked(float(played.get("reward", 0.0)), True, False, {"messages": played.get("messages", [])})
        if outcome.reply is None:
            raise TrainError(f"{self.env_id}: {_SOLUTION[policy]} episode for seed {seed}: {outcome.error}")
        return {"messages": outcome.reply.messages, "reward": outcome.reply.reward, "tools": list(runner.tool_schemas)}

    def close(self) -> None:
        self.auditor.close()
        for slot in range(len(self.envs)):
            if self.envs[slot] is not None:
                self._retire(slot)
        self.replaced = 0
        for executor in self._executors:
            executor.shutdown()
        self._executors = []

    def __enter__(self) -> "EnvPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
