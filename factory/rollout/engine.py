"""Roll a policy out on a target: every (task, trial) once, in parallel, resumable, as ``Trajectory`` JSONL.

Each worker thread owns one target runner (so one MCP server process, and its own private state), and
reuses it for every episode it runs; the gold replays that the DB check needs are computed once per task
and shared. Every finished episode is appended to ``trajectories.jsonl`` at once, so an interrupted run
resumes where it stopped. One failing episode never stops the others: a target, user or policy failure
ends that episode with the error recorded in its metadata, and the summary counts it.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, Field

from env_registry.targets.catalog import TargetSpec, resolve_target, skipped_tasks, spec_tasks
from env_registry.targets.env import make_judge, with_server_contract
from env_registry.targets.errors import TargetConfigError, TargetError, TargetInfraError
from env_registry.targets.mcp import parse_server
from env_registry.targets.runner import GoldCache, TargetRunner
from env_registry.targets.tasks import Task, select_tasks
from env_registry.targets.users import UserSimulatorError, user_factory
from schemas.errors import FactoryError, interrupt_exit_code
from factory.rollout.load import load_policy
from factory.rollout.policies import Policy, PolicyError
from factory.rollout.store import RolloutStore, RunSettings
from factory.rollout.summary import RolloutSummary, summarise
from schemas.trajectory import Trajectory

Progress = Callable[[int, int, int], None]
"""progress(done, total, passed) after every episode of this invocation."""


class RolloutConfig(BaseModel):
    target: str
    out: Path
    policy: str
    tasks_file: str | None = None
    task_ids: list[str] | None = None
    server: str | None = None
    backend: str = "auto"
    user: str = "scripted"
    judge: str | None = None
    trials: int = Field(default=1, ge=1)
    concurrency: int = Field(default=4, ge=1)
    max_steps: int = Field(default=100, ge=1)
    max_errors: int = Field(default=10, ge=1)
    seed: int = 0
    temperature: float | None = 0.0
    max_tokens: int | None = None
    call_timeout_s: float | None = Field(default=None, gt=0)
    reset: Literal["auto", "tool", "restart", "none"] | None = None
    reset_tool: str | None = None
    state_tool: str | None = None
    allow_shared_state: bool = False
    workdir: str | None = None
    inherit_env: list[str] | None = None


def episode_seed(seed: int, task_id: str, trial: int) -> int:
    digest = hashlib.sha256(f"{seed}:{task_id}:{trial}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def check_names(config: RolloutConfig, policy: bool = True) -> None:
    """The policy (unless the caller passes a ``Policy`` object), user and judge specs, by name alone
    (``InputError`` with the accepted forms): a typo must not surface as a missing API key, or only after the
    target servers started."""
    from factory.preflight import check_judge, check_policy, check_user

    if policy:
        check_policy(config.policy)
    check_user(config.user)
    check_judge(config.judge)


def resolve(config: RolloutConfig) -> tuple[TargetSpec, list[Task]]:
    server = parse_server(config.server) if config.server else None
    spec = resolve_target(
        config.target, tasks_file=config.tasks_file, server=server, backend=config.backend, call_timeout_s=config.call_timeout_s  # type: ignore[arg-type]
    )
    spec = with_server_contract(spec, reset=config.reset, reset_tool=config.reset_tool, state_tool=config.state_tool,
                                allow_shared_state=config.allow_shared_state, workdir=config.workdir, inherit_env=config.inherit_env or None)
    return spec, select_tasks(spec_tasks(spec, config.task_ids), config.task_ids)


class Rollout:
    """One invocation. ``stop`` (an Event) ends it early: episodes in flight are abandoned, not written.
    ``gold_cache`` lets several rollouts on the same target share their gold replays."""

    def __init__(
        self,
        config: RolloutConfig,
        *,
        policy: Policy | None = None,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
        gold_cache: GoldCache | None = None,
    ) -> None:
        self.config = config
        check_names(config, policy=policy is None)  # before a server starts or a model loads
        self.stopped_by: int | None = None  # 130 or 143 when a signal stopped the run
        self.spec, self.tasks = resolve(config)
        self.policy = policy or load_policy(config.policy, temperature=config.temperature, max_tokens=config.max_tokens)
        self.users = user_factory(config.user, temperature=config.temperature)
        self.judge = make_judge(config.judge)
        self.progress = progress
        self.stop = stop or threading.Event()
        self.gold = gold_cache or GoldCache()
        self._local = threading.local()
        self._runners: list[TargetRunner] = []
        self._runners_lock = threading.Lock()

    def settings(self) -> RunSettings:
        c = self.config
        return RunSettings(
            target=self.spec.id,
            backend=self.spec.backend,
            server=c.server,
            tasks_source=self.spec.tasks_file or "bundled",
            policy=self.policy.spec,
            user=c.user,
            judge=c.judge,
            max_steps=c.max_steps,
            max_errors=c.max_errors,
            seed=c.seed,
            temperature=c.temperature,
            max_tokens=c.max_tokens,
        )

    def run(self) -> RolloutSummary:
        started = time.monotonic()
        versions = {task.id: task.version for task in self.tasks}
        with RolloutStore(self.config.out) as store:
            kept = store.open(self.settings(), versions)
            wanted = {(task.id, trial) for task in self.tasks for trial in range(self.config.trials)}
            finished = [t for t in kept if (t.task_id, int(t.metadata["trial"])) in wanted]
            done = {(t.task_id, int(t.metadata["trial"])) for t in finished}
            jobs = [(task, trial) for trial in range(self.config.trials) for task in self.tasks if (task.id, trial) not in done]
            new: list[Trajectory] = []
            try:
                self._run_jobs(jobs, store, new)
            finally:
                self._close_runners()
            new = store.appended()
            header = {"target": self.spec.id, "policy": self.policy.spec, "user": self.config.user, "judge": self.config.judge, "out": str(self.config.out)}
            summary = summarise(finished + new, trials=self.config.trials, tasks=len(self.tasks), header=header, resumed=len(finished), ran=len(new))
            summary.skipped = skipped_tasks(self.spec, self.config.task_ids)
            summary.interrupted = self.stop.is_set() and len(new) < len(jobs)
            summary.duration_s = round(time.monotonic() - started, 2)
            store.write_summary(summary)
        return summary

    def _run_jobs(self, jobs: list[tuple[Task, int]], store: RolloutStore, new: list[Trajectory]) -> None:
        if self.progress:
            self.progress(0, len(jobs), 0)
        if not jobs:
            return
        passed = 0
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(jobs)), thread_name_prefix="rollout") as pool:
            futures = [pool.submit(self._episode, task, trial) for task, trial in jobs]
            try:
                for future in concurrent.futures.as_completed(futures):
                    trajectory = future.result()
                    if trajectory is None:
                        continue
                    store.append(trajectory)
                    new.append(trajectory)
                    passed += trajectory.success
                    if self.progress:
                        self.progress(len(new), len(jobs), passed)
            except KeyboardInterrupt as exc:  # keep what finished; episodes in flight see `stop` and give up
                self.stopped_by = interrupt_exit_code(exc)
                self.stop.set()
                for future in futures:
                    future.cancel()
                self._close_runners()  # an episode blocked on its server (a handshake that never comes) ends now, not at its timeout
            except BaseException:
                self.stop.set()
                for future in futures:
                    future.cancel()
                raise

    # --- one episode ---------------------------------------------------------------------------
    def _runner(self) -> TargetRunner:
        runner = getattr(self._local, "runner", None)
        if runner is None and self.spec.backend == "toolsandbox":  # ToolSandbox runs whole conversations in its worker
            from env_registry.targets.toolsandbox_runner import ToolSandboxRunner

            runner = ToolSandboxRunner(self.spec, tasks=self.tasks, user=self.config.user, temperature=self.config.temperature,
                                       max_steps=self.config.max_steps, call_timeout_s=self.config.call_timeout_s)  # type: ignore[assignment]
            self._local.runner = runner
            with self._runners_lock:
                self._runners.append(runner)  # type: ignore[arg-type]
        if runner is None:
            runner = TargetRunner(
                self.spec,
                tasks=self.tasks,
                user=self.users,
                judge=self.judge,
                max_steps=self.config.max_steps,
                max_errors=self.config.max_errors,
                gold_cache=self.gold,
            )
            self._local.runner = runner
            with self._runners_lock:
                self._runners.append(runner)
        return runner

    def _close_runners(self) -> None:
        with self._runners_lock:
            runners, self._runners = self._runners, []
        for runner in runners:
            try:
                runner.close()
            except Exception:  # noqa: BLE001 - closing a dead server must not hide the run's result
                pass

    def _episode(self, task: Task, trial: int) -> Trajectory | None:
        if self.stop.is_set():
            return None
        seed = episode_seed(self.config.seed, task.id, trial)
        started = time.monotonic()
        runner = self._runner()
        info: dict[str, Any] = {}
        failure: tuple[str, str] | None = None
        reward, termination, served_by = 0.0, None, None
        try:
            first = runner.reset(seed, task_id=task.id)
            served_by = first.info["backend"]
            act = self.policy.start(task, first.info["tools"], seed)
            while True:
                if self.stop.is_set():
                    return None
                result = runner.step(act(list(runner.messages)))
                if result.terminated or result.truncated:
                    info, reward = result.info, result.reward
                    termination = info.get("termination_reason")
                    if info.get("infrastructure_error"):
                        failure = ("infrastructure_error", info["infrastructure_error"])
                    break
        except (TargetInfraError, UserSimulatorError) as exc:
            termination = "user_error" if isinstance(exc, UserSimulatorError) else "infrastructure_error"
            failure = ("infrastructure_error", " ".join(str(exc).split()))
        except PolicyError as exc:
            termination, failure = "agent_error", ("agent_error", " ".join(str(exc).split()))
        except TargetConfigError:  # the run's configuration, not this episode (e.g. a server that cannot be reset)
            raise
        except (TargetError, FactoryError) as exc:
            termination, failure = "infrastructure_error", ("infrastructure_error", " ".join(str(exc).split()))
        except Exception as exc:  # noqa: BLE001 - a bug in one episode must not take the run down
            last = traceback.extract_tb(exc.__traceback__)[-1]
            termination = "internal_error"
            failure = ("internal_error", f"{type(exc).__name__}: {exc} (at {Path(last.filename).name}:{last.lineno})")
        info.setdefault("backend", served_by)
        return self._trajectory(task, trial, seed, runner, info, reward, termination, failure, time.monotonic() - started)

    def _trajectory(
        self, task: Task, trial: int, seed: int, runner: TargetRunner, info: dict[str, Any], reward: float,
        termination: str | None, failure: tuple[str, str] | None, duration: float,
    ) -> Trajectory:  # fmt: skip
        detail = info.get("reward_detail") or {"total": 0.0, "notes": {"error": failure[1] if failure else "no grade"}}
        metadata: dict[str, Any] = {
            "trial": trial,
            "termination_reason": termination or "unknown",
            "reward_detail": detail,
            "task_version": task.version,
            "domain": self.spec.domain or task.domain,
            "policy": self.policy.spec,
            "user": self.config.user,
            "backend": self.spec.backend,
            "served_by": info.get("backend"),
            "seed": seed,
            "steps": runner.steps,
            "duration_s": round(duration, 3),
            "gold_actions": [a.model_dump(exclude_none=True, include={"name", "arguments", "compare_args"}) for a in task.gold_actions],
        }
        if failure is not None:
            metadata[failure[0]] = failure[1]
        messages = info.get("messages") or list(runner.messages)
        score = min(1.0, max(0.0, float(reward))) if failure is None else 0.0
        return Trajectory(
            id=f"{task.id}#{trial}",
            target=self.spec.id,
            task_id=task.id,
            messages=messages,
            reward=score,
            success=failure is None and score >= 1.0,
            source="rollout",
            metadata=metadata,
        )


def run_rollout(config: RolloutConfig, **kwargs: Any) -> RolloutSummary:
    return Rollout(config, **kwargs).run()
