"""An env hosted in a persistent sandbox worker: the only way untrusted env code is executed. Host side.

The CLI, the validator and the Gymnasium wrapper hold a :class:`SandboxedEnv`; the env's module is loaded
and run by ``trace_env.handler`` inside the sandbox, and only JSON crosses the boundary. Every reply is
checked by shape (:mod:`schemas.wire`) before anything uses it: a malformed one raises
:class:`~sandbox.WorkerBadReply`, which fails the check or the step that asked.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import secrets
import threading
from typing import Any

from trace_env.engine import StepResult
from trace_env.sdk import Turn
from sandbox import SandboxLimits, WorkerBadReply, open_sandbox
from sandbox.errors import RequestNotEncodable, WorkerTimeout
from sandbox.base import Sandbox, Worker
from sandbox.leftovers import reap_once
from schemas.wire import MalformedReply, check_reply

HANDLER = "trace_env.handler"
ENV_MODULE = "trace_env_module"
"""The name every worker loads env source under: one name, so nothing in a worker tells which caller started it."""

WORKER_LIMITS = SandboxLimits(cpu_seconds=6 * 3600)
"""The sandbox limits of every env worker: the gate's lanes and fresh worker, training's pool, ``gym.make``, the
router. One definition, so nothing an env can observe from inside (rlimits, cgroup, tmpfs sizes) tells the gate
from training. RLIMIT_CPU is a run's, not one job's: it is cumulative per process, and a pooled worker serves
every episode of a run; what keeps an env's calls cheap is the gate's per-call CPU and wall budget."""


STEP_TIMEOUT_S = 10.0
"""The longest one ``reset``, ``step`` or ``truncate`` of a :class:`SandboxedRunner` may take (the caller's RPC timeout
when that is shorter). A hundred times the gate's step budget: only a stall reaches it. Past it the worker is killed
from the host, which ends a stall in native code too (a ``select`` sleep, a backtracking regex), where nothing inside
the interpreter could interrupt it."""

_STALLS_KEPT = 4096


class EnvStalled(WorkerTimeout):
    """The env's reset or step did not return within its deadline: the env's fault (a sleep, a blocking call or a
    runaway computation in its code), not the agent's. The worker was killed; the runner's next reset starts a
    fresh one. The same seed and actions stall at once after that (envs are deterministic), without running."""


class _StallMemo:
    """(env source, seed, turn limit, actions so far) of every call that stalled in this process, bounded: a replay of
    a stalled episode on a fresh worker (the training pool replays a failed step) fails at once instead of stalling
    for the whole deadline again."""

    def __init__(self) -> None:
        self._seen: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            return self._seen.get(key)

    def add(self, key: str, message: str) -> None:
        with self._lock:
            self._seen[key] = message
            while len(self._seen) > _STALLS_KEPT:
                self._seen.popitem(last=False)


STALLS = _StallMemo()


def random_hash_seed() -> int:
    """A ``PYTHONHASHSEED`` for one worker. Every worker gets its own (training's, the gate's, the
    router's alike): a check that compares two hash seeds is then no condition an env could detect."""
    return 1 + secrets.randbelow(2**32 - 2)


def action_to_json(action: Any) -> Any:
    """Actions must cross a process boundary: SDK turns and pydantic messages become plain dicts."""
    if isinstance(action, Turn):
        return action.to_json()
    if hasattr(action, "model_dump"):
        return action.model_dump(mode="json")
    if dataclasses.is_dataclass(action) and not isinstance(action, type):
        return dataclasses.asdict(action)
    if isinstance(action, (str, dict, list)) or action is None:
        return action
    if isinstance(action, (bytes, bytearray)):
        return action.decode("utf-8", errors="replace")
    return str(action)


def refused_action(cause: str) -> dict[str, Any]:
    """What an action that cannot travel as JSON (a cycle, extreme nesting) becomes: a call the env refuses."""
    problem = f"the action could not be encoded as JSON ({cause}); send text or a JSON-encodable message"
    return {"role": "assistant", "content": None, "tool_calls": [{"name": "invalid", "error": problem}]}


class SandboxedEnv:
    """One env loaded in one sandbox worker. Use as a context manager, or call :meth:`close`.

    The one constructor of every env worker, training's and the gate's: the same sandbox with the same limits
    (:data:`WORKER_LIMITS`; ``limits`` overrides them only for a caller that wants other limits everywhere),
    the same worker command, a random hash seed (``hash_seed`` fixes one only for tests) and the env loaded
    under the same module name (``module_name`` is accepted for callers of earlier releases and not sent), so
    an env sees nothing that tells the gate from training.
    """

    def __init__(
        self,
        source: str,
        backend: str = "auto",
        limits: SandboxLimits | None = None,
        load_timeout_s: float = 30.0,
        rpc_timeout_s: float = 30.0,
        module_name: str | None = None,
        hash_seed: int | None = None,
        step_timeout_s: float | None = None,
    ) -> None:
        self.source = source
        self.rpc_timeout_s = rpc_timeout_s
        self.load_timeout_s = load_timeout_s
        #: The deadline of one reset, step or truncate (:data:`STEP_TIMEOUT_S` unless given; never past the RPC timeout).
        self.step_timeout_s = min(rpc_timeout_s, STEP_TIMEOUT_S if step_timeout_s is None else step_timeout_s)
        reap_once()  # sandboxes left behind by processes that died (kill -9) before this one opens its own
        self.sandbox: Sandbox = open_sandbox(backend, limits or WORKER_LIMITS)
        try:
            self.hash_seed = random_hash_seed() if hash_seed is None else int(hash_seed)
            self.worker: Worker = self.sandbox.start_worker(HANDLER, hash_seed=self.hash_seed)
            self.info: dict[str, Any] = self.call("load", {"source": source, "module_name": ENV_MODULE}, timeout_s=load_timeout_s)
        except BaseException:
            self.sandbox.close()
            raise

    @property
    def backend(self) -> str:
        return self.sandbox.backend

    def call(self, method: str, params: dict[str, Any] | None = None, timeout_s: float | None = None) -> Any:
        """Call a handler method; its reply is validated by shape for ``method`` (WorkerBadReply if not)."""
        result = self.worker.call(method, params or {}, timeout_s=timeout_s or self.rpc_timeout_s)
        try:
            return check_reply(method, result)
        except MalformedReply as exc:
            raise WorkerBadReply(f"env worker: {exc}") from None

    def revive(self) -> None:
        """A fresh worker with the env loaded, in place of one that was killed (a stall); nothing if it runs."""
        if not self.worker.alive:
            self.worker.restart()
            self.info = self.call("load", {"source": self.source, "module_name": ENV_MODULE}, timeout_s=self.load_timeout_s)

    def close(self) -> None:
        self.sandbox.close()

    def __enter__(self) -> "SandboxedEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SandboxedRunner:
    """The :class:`~trace_env.engine.EpisodeRunner` interface, served by a sandbox worker."""

    def __init__(self, hosted: SandboxedEnv) -> None:
        self.hosted = hosted
        capability, tools = hosted.info.get("capability"), hosted.info.get("tools")
        if not isinstance(capability, str) or not isinstance(tools, list):
            raise WorkerBadReply("env worker: the env did not declare its capability and tools when it loaded")
        self.capability: str = capability
        self.tool_schemas: list[dict[str, Any]] = tools
        self._source_key = hashlib.sha256(hosted.source.encode("utf-8", "surrogatepass")).hexdigest()
        self._trail = hashlib.sha256()  # the episode so far: seed, turn limit, actions
        self._seed: int | None = None
        self._turn = 0
        self._stalled = False

    def reset(self, seed: int, max_steps: int | None = None) -> StepResult:
        params: dict[str, Any] = {"seed": int(seed)}
        if max_steps is not None:
            params["max_steps"] = int(max_steps)
        self._seed, self._turn = int(seed), 0
        self._trail = hashlib.sha256(f"{self._source_key}/{int(seed)}/{max_steps}".encode())
        if self._stalled:  # a stall killed the worker: the next episode gets a fresh one
            self._stalled = False
            self.hosted.revive()
        return self._timed("reset", params, "its reset")

    def truncate(self) -> StepResult:
        """End the running episode from outside; the worker grades the state reached."""
        return self._timed("truncate", {}, "grading at truncation", remember=False)

    def step(self, action: Any) -> StepResult:
        """The action is made plain once and written as JSON once (by the worker client); one that cannot be
        written is refused with a call the env answers with an error observation, and the episode goes on."""
        self._turn += 1
        plain = action_to_json(action)
        try:
            return self._timed("step", {"action": plain}, f"step {self._turn}")
        except RequestNotEncodable as exc:
            return self._timed("step", {"action": refused_action(exc.cause)}, f"step {self._turn}")

    def _timed(self, method: str, params: dict[str, Any], what: str, remember: bool = True) -> StepResult:
        """One call under the step deadline. A call that stalled before on the same env, seed and actions raises
        :class:`EnvStalled` without running; one that stalls now kills the worker and raises it."""
        if remember:  # the trail advances only with what reached the env (an unencodable action raises first)
            try:
                self._trail.update(json.dumps(params, sort_keys=True, default=str).encode())
            except (ValueError, RecursionError):
                pass
        key = self._trail.hexdigest()
        known = STALLS.get(key) if remember else None
        if known is not None:
            raise EnvStalled(f"{known} (it stalled on this seed and these actions before; not run again)")
        try:
            return _step_result(self.hosted.call(method, params, timeout_s=self.hosted.step_timeout_s))
        except WorkerTimeout:
            message = (f"the env stalled: {what} on seed {self._seed} did not return within {self.hosted.step_timeout_s:g} s "
                       f"(a sleep, a blocking call or a runaway computation in the env's own code, {self.capability}); "
                       "its worker was killed and the next episode gets a fresh one")
            if remember:
                STALLS.add(key, message)
            self._stalled = True
            raise EnvStalled(message) from None

    def close(self) -> None:
        self.hosted.close()


def _step_result(data: dict[str, Any]) -> StepResult:
    """A validated ``reset``/``step`` reply (schemas.wire.StepReply) as the engine's StepResult."""
    return StepResult(data["observation"], data["reward"], data["terminated"], data["truncated"], data["info"])
