"""Host side: a pool of sandboxed Gymnasium envs, kept open across iterations and stepped in parallel.

Each live episode needs its own env (a sandbox worker hosts one episode at a time), so the pool holds one
``gym.make`` env per concurrent rollout, started once and reused every iteration. Env calls are
sub-process RPCs, so a thread pool overlaps them. Everything that comes back is validated before the
trainer uses it; a worker that fails ends only its own episode (an ``infrastructure_error``) and is
replaced on next use.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from schemas.messages import Message
from trainer.errors import TrainError


class EnvReply(BaseModel):
    """The part of an env's reset/step answer the trainer relies on, checked (the sandbox is untrusted)."""

    model_config = ConfigDict(extra="ignore")

    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    messages: list[dict[str, Any]] = Field(default_factory=list)
    new_messages: list[dict[str, Any]] = Field(default_factory=list)
    assistant_message: dict[str, Any] | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    reward_components: dict[str, float] = Field(default_factory=dict)
    ended_by: str | None = None
    scenario_hash: str | None = None
    max_steps: int | None = None
    capability: str | None = None
    target: str | None = None

    @field_validator("reward")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("reward is not a finite number")
        return value

    @field_validator("messages", "new_messages")
    @classmethod
    def _messages(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [Message.model_validate(m).model_dump(exclude_none=True) for m in value]

    @field_validator("assistant_message")
    @classmethod
    def _assistant(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else Message.model_validate(value).model_dump(exclude_none=True)


@dataclass
class EnvOutcome:
    """One env answer, or the one-line reason there is none (the episode then ends as an infra error)."""

    reply: EnvReply | None
    error: str | None = None


def _checked(reward: float, terminated: bool, truncated: bool, info: dict[str, Any]) -> EnvOutcome:
    try:
        return EnvOutcome(EnvReply.model_validate({**info, "reward": reward, "terminated": terminated, "truncated": truncated}))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return EnvOutcome(None, f"the env sent a malformed answer ({where}: {first['msg']})")


@dataclass
class EnvPool:
    """``size`` envs of one registered id. ``env_seconds`` is the wall time spent waiting on them."""

    env_id: str
    sandbox: str | None = None
    make: Callable[..., Any] | None = None
    workers: int | None = None
    envs: list[Any] = field(default_factory=list)
    env_seconds: float = 0.0
    replaced: int = 0

    def __post_init__(self) -> None:
        from env_registry.registration import register_all

        register_all()  # envs registered since ``import env_registry`` (e.g. by a build in this process)
        # Sandbox workers die with the *thread* that started them (bwrap sets PR_SET_PDEATHSIG, which is
        # per thread), so a pool thread must outlive the envs it started: executors are only ever added.
        self._executors: list[ThreadPoolExecutor] = []

    def _make_one(self) -> Any:
        import gymnasium as gym

        make = self.make or gym.make
        kwargs: dict[str, Any] = {"disable_env_checker": True}
        if self.sandbox:
            kwargs["sandbox"] = self.sandbox
        try:
            return make(self.env_id, **kwargs)
        except gym.error.Error as exc:
            raise TrainError(f"{self.env_id}: {exc}; list registered envs with `factory envs list`") from None

    def _pool(self, n: int) -> ThreadPoolExecutor:
        wanted = max(1, min(self.workers or n, 64))
        if not self._executors or self._executors[-1]._max_workers < wanted:  # noqa: SLF001
            self._executors.append(ThreadPoolExecutor(max_workers=wanted, thread_name_prefix="trace-env"))
        return self._executors[-1]

    def ensure(self, n: int) -> None:
        """Start envs until there are ``n`` (in parallel: sandbox start-up dominates)."""
        missing = [i for i in range(n) if i >= len(self.envs) or self.envs[i] is None]
        if not missing:
            return
        self.envs.extend([None] * (n - len(self.envs)))
        started = time.perf_counter()
        made = list(self._pool(n).map(lambda _: self._make_one(), missing))
        for slot, env in zip(missing, made):
            self.envs[slot] = env
        self.env_seconds += time.perf_counter() - started

    def _call(self, slots: list[int], call: Callable[[Any, int], tuple[Any, ...]]) -> list[EnvOutcome]:
        def one(index: int) -> EnvOutcome:
            slot = slots[index]
            try:
                return call(self.envs[slot], index)  # type: ignore[return-value]
            except Exception as exc:  # sandbox died, timed out, or the env raised: this episode only
                self._retire(slot)
                return EnvOutcome(None, f"{type(exc).__name__}: {str(exc)[:300]}")

        started = time.perf_counter()
        outcomes = list(self._pool(len(slots)).map(one, range(len(slots))))
        self.env_seconds += time.perf_counter() - started
        return outcomes

    def reset(self, slots: list[int], seeds: list[int]) -> list[EnvOutcome]:
        self.ensure(max(slots) + 1 if slots else 0)

        def reset_one(env: Any, index: int) -> EnvOutcome:
            _, info = env.reset(seed=int(seeds[index]))
            return _checked(0.0, False, False, info)

        return self._call(slots, reset_one)

    def step(self, slots: list[int], actions: list[Any]) -> list[EnvOutcome]:
        def step_one(env: Any, index: int) -> EnvOutcome:
            _, reward, terminated, truncated, info = env.step(actions[index])
            return _checked(reward, terminated, truncated, info)

        return self._call(slots, step_one)

    def _retire(self, slot: int) -> None:
        env, self.envs[slot] = self.envs[slot], None
        self.replaced += 1
        try:
            env.close()
        except Exception:  # already dead
            pass

    # --- reference solutions (warm start, hints) ---------------------------------------------
    def reference_episode(self, seed: int) -> dict[str, Any]:
        """The env's reference solution played from ``seed``: messages, tools and reward (validated)."""
        self.ensure(1)
        runner = self.envs[0].unwrapped.runner
        started = time.perf_counter()
        try:
            hosted = getattr(runner, "hosted", None)
            if hosted is not None:  # sandboxed: the worker plays it
                played = hosted.call("episode", {"seed": int(seed), "policy": "reference"})
            else:  # TRACE_FACTORY_UNSAFE_INPROCESS=1: the engine is in this process
                from trace_env.engine import run_episode

                env = runner.env
                played = run_episode(env, int(seed), env.reference_solution(env.generate(int(seed))))
        finally:
            self.env_seconds += time.perf_counter() - started
        outcome = _checked(float(played.get("reward", 0.0)), True, False, {"messages": played.get("messages", [])})
        if outcome.reply is None:
            raise TrainError(f"{self.env_id}: reference episode for seed {seed}: {outcome.error}")
        return {"messages": outcome.reply.messages, "reward": outcome.reply.reward, "tools": list(runner.tool_schemas)}

    def close(self) -> None:
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
