"""The episode engine of a real target: the same reset/step/StepResult contract as ``trace_env.engine``.

A policy cannot tell a target from a synthetic env: actions are parsed by ``trace_env.actions`` (raw
text with ``<tool_call>`` blocks, OpenAI JSON or an OpenAI message), tool calls go to the target, text goes
to the simulated user, observations are the new messages rendered as text, and ``info`` carries
``messages``, ``new_messages``, ``tools``, ``reward_components`` and ``reward_detail`` under the same keys.
Targets add ``task_id``, ``termination_reason`` (τ²'s vocabulary) and, when the target or the simulated
user failed, ``infrastructure_error``: such an episode ends at once, scores 0 and is not the agent's fault.

Episodes end as in τ²: the agent writes ``###STOP###`` (``agent_stop``), the user stops (``user_stop``),
``max_errors`` tool errors (``too_many_errors``), or ``max_steps`` agent turns (``max_steps``, truncated).
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable

from trace_env.actions import ParsedCall, parse_action
from trace_env.engine import StepResult, render_messages

from env_registry.targets.backend import Replay, TargetBackend
from env_registry.targets.catalog import TargetSpec, open_backend, spec_tasks
from env_registry.targets.errors import TargetInfraError
from env_registry.targets.reward import grade_episode
from env_registry.targets.tasks import Task, select_tasks
from env_registry.targets.users import ScriptedTaskUser, SimulatedUser, UserSimulatorError

AGENT_STOP = "###STOP###"
UserFactory = Callable[[Task, int], SimulatedUser]

AGENT_INSTRUCTIONS = """You are a customer service agent. Help the user with their request, following the
policy below exactly. In each turn you either write a message to the user or call one or more tools.
Use the tools to look up and change records; never invent information that a tool could give you.
When the conversation is finished, write ###STOP###."""


def agent_system_prompt(policy: str) -> str:
    return f"<instructions>\n{AGENT_INSTRUCTIONS}\n</instructions>\n<policy>\n{policy.strip()}\n</policy>" if policy.strip() else AGENT_INSTRUCTIONS


def scripted_user(task: Task, seed: int) -> SimulatedUser:
    return ScriptedTaskUser(task)


class GoldCache:
    """Gold replays by (backend identity, task version): computed once, shared by every runner of a rollout."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[tuple[str, str], Replay] = {}
        self._pending: dict[tuple[str, str], threading.Lock] = {}

    def get(self, key: tuple[str, str], compute: Callable[[], Replay]) -> Replay:
        with self._lock:
            if key in self._done:
                return self._done[key]
            gate = self._pending.setdefault(key, threading.Lock())
        with gate:
            with self._lock:
                if key in self._done:
                    return self._done[key]
            replay = compute()
            if replay.hash is not None:
                with self._lock:
                    self._done[key] = replay
            return replay


PROCESS_GOLD_CACHE = GoldCache()


class TargetRunner:
    """Runs episodes of one target, one at a time (one backend, so one server process for MCP)."""

    def __init__(
        self,
        spec: TargetSpec,
        *,
        tasks: list[Task] | None = None,
        task_id: str | None = None,
        user: UserFactory = scripted_user,
        judge: Callable[[list[dict[str, Any]], list[str]], dict[str, Any]] | None = None,
        max_steps: int = 100,
        max_errors: int = 10,
        gold_cache: GoldCache | None = None,
        backend: TargetBackend | None = None,
    ) -> None:
        self.spec = spec
        self.tasks = tasks if tasks is not None else spec_tasks(spec)
        if task_id is not None:
            select_tasks(self.tasks, [str(task_id)])
        self.fixed_task = None if task_id is None else str(task_id)
        self.user_factory = user
        self.judge = judge
        self.max_steps = max_steps
        self.max_errors = max_errors
        self.gold_cache = gold_cache or PROCESS_GOLD_CACHE
        self.backend = backend or open_backend(spec)
        self.capability = spec.id
        self.task: Task | None = None
        self.messages: list[dict[str, Any]] = []
        self.done = True
        self.steps = 0
        self.errors = 0
        self._user: SimulatedUser | None = None
        self._tool_names: set[str] = set()

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return self.backend.tools()

    def pick_task(self, seed: int, task_id: str | None = None) -> Task:
        wanted = task_id if task_id is not None else self.fixed_task
        if wanted is not None:
            return select_tasks(self.tasks, [str(wanted)])[0]
        return self.tasks[int(seed) % len(self.tasks)]

    # --- Gymnasium-shaped API -----------------------------------------------------------------
    def reset(self, seed: int, task_id: str | None = None) -> StepResult:
        """Fresh target state and a new user for the task (``task_id``, the fixed task, or ``seed`` mod #tasks).

        Raises ``TargetInfraError`` when the target cannot start and ``UserSimulatorError`` when the user
        cannot open: no episode exists to end in that case.
        """
        task = self.pick_task(seed, task_id)
        self.task, self.messages, self.steps, self.errors, self.done = None, [], 0, 0, True
        tools = self.backend.tools()
        self._tool_names = {t["function"]["name"] for t in tools}
        self.backend.reset()
        self._user = self.user_factory(task, int(seed))
        first = self._user.opening()
        system = agent_system_prompt(self.spec.policy or self.backend.policy() or "")
        self.task, self.done = task, False
        self.messages = [{"role": "system", "content": system}, {"role": "user", "content": first}]
        observation = f"[system]\n{system}\n\n[tools]\n{json.dumps(tools, ensure_ascii=False)}\n\n[user] {first}"
        info = {
            "seed": int(seed),
            "capability": self.spec.id,
            "target": self.spec.id,
            "task_id": task.id,
            "scenario_hash": task.version,
            "task_version": task.version,
            "tools": tools,
            "messages": list(self.messages),
            "max_steps": self.max_steps,
            "reward_range": [0.0, 1.0],  # τ²'s reward, like a synthetic env's declared range
            "backend": self.backend.describe(),
            "user": getattr(self._user, "name", type(self._user).__name__),
        }
        return StepResult(observation=observation, info=info)

    def step(self, action: Any) -> StepResult:
        if self.task is None or self.done:
            raise RuntimeError("step() called before reset() or after the episode ended; call reset(seed) first")
        self.steps += 1
        parsed = parse_action(action)
        assistant: dict[str, Any] = {"role": "assistant", "content": parsed.content}
        if parsed.calls:
            assistant["tool_calls"] = [
                {"id": call.id or f"call_{self.steps}_{i}", "type": "function", "function": {"name": call.name, "arguments": call.raw_arguments}}
                for i, call in enumerate(parsed.calls)
            ]
        self.messages.append(assistant)
        new_messages: list[dict[str, Any]] = []
        termination: str | None = None
        failure: str | None = None
        try:
            if parsed.calls:
                for call, wire in zip(parsed.calls, assistant["tool_calls"]):
                    content, error = self._execute(call)
                    self.errors += int(error)
                    message = {"role": "tool", "tool_call_id": wire["id"], "name": call.name, "content": content}
                    self.messages.append(message)
                    new_messages.append(message)
                if self.errors >= self.max_errors:
                    termination = "too_many_errors"
            elif AGENT_STOP in (parsed.content or ""):
                termination = "agent_stop"
            else:
                assert self._user is not None
                try:
                    turn = self._user.reply(self.messages)
                except UserSimulatorError as exc:
                    termination, failure = "user_error", str(exc)
                else:
                    message = {"role": "user", "content": turn.text}
                    self.messages.append(message)
                    new_messages.append(message)
                    termination = "user_stop" if turn.done else None
        except TargetInfraError as exc:
            termination, failure = "infrastructure_error", str(exc)
        truncated = termination is None and self.steps >= self.max_steps
        if truncated:
            termination = "max_steps"
        info: dict[str, Any] = {"steps": self.steps, "assistant_message": assistant, "new_messages": new_messages}
        reward = 0.0
        if termination is not None:
            self.done = True
            reward = self._finish(termination, failure, info)
        return StepResult(render_messages(new_messages), reward, termination is not None and not truncated, truncated, info)

    def close(self) -> None:
        self.backend.close()

    # --- internals ----------------------------------------------------------------------------
    def _execute(self, call: ParsedCall) -> tuple[str, bool]:
        """One tool call; returns (what the agent sees, whether it is an error). Target failures raise."""
        if call.error:
            return f"Error: {call.error}", True
        if call.name not in self._tool_names:
            return f"Error: Tool '{call.name}' not found.", True
        arguments = dict(call.arguments or {})
        for hidden in sorted(self.backend.hidden_arguments & set(arguments)):  # e.g. another episode's state key
            return f"Error: {call.name}() got an unexpected keyword argument '{hidden}'", True
        outcome = self.backend.call(call.name, arguments)
        return outcome.content, outcome.error

    def _finish(self, termination: str, failure: str | None, info: dict[str, Any]) -> float:
        assert self.task is not None
        task = self.task
        detail: dict[str, Any]
        if failure is None:
            try:
                detail = grade_episode(
                    task,
                    self.messages,
                    termination,
                    final_hash=self.backend.state_hash,
                    gold=lambda: self.gold_cache.get((self.backend.describe(), task.version), lambda: self.backend.replay(task.gold_actions)),
                    judge=self.judge,
                )
            except TargetInfraError as exc:
                termination, failure = "infrastructure_error", f"while grading: {exc}"
        if failure is not None:
            detail = {"total": 0.0, "components": {}, "gates": {}, "weights": {}, "notes": {"error": failure}, "fully_judged": False}
            info["infrastructure_error"] = " ".join(failure.split())
        info.update(
            reward_components=dict(detail["gates"]),
            reward_detail=detail,
            ended_by=termination,
            termination_reason=termination,
            messages=list(self.messages),
            task_id=task.id,
        )
        return float(detail["total"])

