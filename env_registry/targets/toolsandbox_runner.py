"""The episode engine of the ToolSandbox target, with ``TargetRunner``'s surface (reset/step, ``messages``,
``steps``, the same ``info`` keys), so the rollout engine, policies and gym env treat it like τ².

The agent's turn goes to the worker: tool calls are executed by ToolSandbox's execution environment, a
message goes to the user. The user (``toolsandbox_users``) answers or ends the conversation; the episode
ends there (``user_stop``), when the agent writes ``###STOP###`` (``agent_stop``), at the scenario's own
message limit (``max_messages``) or after ``max_steps`` agent turns. ToolSandbox's evaluator then grades
the whole execution context: the reward is its similarity, and ``reward_detail`` keeps milestone and
minefield similarity, turn count and the milestone mapping.
"""

from __future__ import annotations

import json
from typing import Any

from trace_env.actions import parse_action
from trace_env.engine import StepResult, render_messages

from env_registry.targets.catalog import TargetSpec
from env_registry.targets.errors import TargetInfraError
from env_registry.targets.runner import TargetRunner
from env_registry.targets.tasks import Task
from env_registry.targets.toolsandbox import ACTIVE_RUNNER as _ACTIVE, SandboxWorker, describe, runnable_tasks
from env_registry.targets.toolsandbox_users import SandboxUser, sandbox_user_factory
from env_registry.targets.users import UserSimulatorError

AGENT_STOP = "###STOP###"
PERFECT = 1.0 - 1e-9


class ToolSandboxRunner:
    """Runs ToolSandbox scenarios one at a time in one worker process."""

    def __init__(
        self,
        spec: TargetSpec,
        *,
        tasks: list[Task] | None = None,
        task_id: str | None = None,
        user: Any = "scripted",
        temperature: float | None = 0.0,
        max_steps: int = 100,
        call_timeout_s: float | None = None,
    ) -> None:
        self.spec = spec
        self.command = spec.server.command if spec.server is not None else None
        self.tasks = tasks if tasks is not None else runnable_tasks(self.command, [task_id] if task_id else None)[0]
        self.fixed_task = None if task_id is None else str(task_id)
        self.users = sandbox_user_factory(user, temperature=temperature)
        self.max_steps = max_steps
        timeout = call_timeout_s or (spec.server.call_timeout_s if spec.server is not None else 60.0)
        self.worker: SandboxWorker | None = None
        self.timeout = max(timeout, 60.0)
        self.capability = spec.id
        self.task: Task | None = None
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self.done = True
        self.steps = 0
        self._user: SandboxUser | None = None

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return self.tools

    def _worker(self) -> SandboxWorker:
        if self.worker is None or self.worker.process.poll() is not None:
            self.worker = SandboxWorker(self.command, call_timeout_s=self.timeout)
            augmented = any(getattr(t, "augmented", False) for t in self.tasks)
            self.worker.request("hello", timeout_s=120.0, include_augmented=augmented)
        return self.worker

    pick_task = TargetRunner.pick_task  # the task id given, the fixed task, or seed mod #tasks

    def reset(self, seed: int, task_id: str | None = None) -> StepResult:
        task = self.pick_task(seed, task_id)
        self.task, self.messages, self.steps, self.done = None, [], 0, True
        reply = self._worker().request("reset", name=task.id)
        self.tools = list(reply.get("tools") or [])
        self.messages = list(reply.get("messages") or [])
        self._user = self.users(task)
        self.task, self.done = task, False
        _ACTIVE.runner = self
        system = "\n\n".join(m.get("content") or "" for m in self.messages if m.get("role") == "system")
        first = next((m.get("content") or "" for m in self.messages if m.get("role") == "user"), "")
        observation = f"[system]\n{system}\n\n[tools]\n{json.dumps(self.tools, ensure_ascii=False)}\n\n[user] {first}"
        info = {
            "seed": int(seed), "capability": self.spec.id, "target": self.spec.id, "task_id": task.id, "scenario_hash": task.version,
            "task_version": task.version, "tools": self.tools, "messages": list(self.messages), "max_steps": self.max_steps,
            "reward_range": [0.0, 1.0],
            "backend": describe(self.command), "user": getattr(self._user, "name", "user"),
        }  # fmt: skip
        return StepResult(observation=observation, info=info)

    def step(self, action: Any) -> StepResult:
        if self.task is None or self.done:
            raise RuntimeError("step() called before reset() or after the episode ended; call reset(seed) first")
        self.steps += 1
        before = len(self.messages)
        parsed = parse_action(action)
        termination: str | None = None
        failure: str | None = None
        try:
            if parsed.calls:
                calls = [{"name": c.name, "arguments": c.arguments if c.error is None else None} for c in parsed.calls]
                reply = self._worker().request("agent", tool_calls=calls)
            else:
                text = parsed.content or ""
                stop = AGENT_STOP in text
                text = text.replace(AGENT_STOP, "").strip() if stop else text
                reply = self._worker().request("agent", content=text) if (text or not stop) else {"messages": self.messages, "next": "agent"}
                if stop:
                    termination = "agent_stop"
            self.messages, upcoming = list(reply.get("messages") or []), str(reply.get("next"))
            if termination is None:
                termination = self._users_turns(upcoming)
        except UserSimulatorError as exc:
            termination, failure = "user_error", str(exc)
        except TargetInfraError as exc:
            termination, failure = "infrastructure_error", str(exc)
        if termination is None and self.steps >= self.max_steps:
            termination = "max_steps"
        truncated = termination in ("max_steps", "max_messages")
        new_messages = self.messages[before + 1 :] if len(self.messages) > before else []
        info: dict[str, Any] = {"steps": self.steps, "assistant_message": self.messages[before] if len(self.messages) > before else None,
                                "new_messages": new_messages}  # fmt: skip
        reward = 0.0
        if termination is not None:
            self.done = True
            reward = self._finish(termination, failure, info)
        return StepResult(render_messages(new_messages), reward, termination is not None and not truncated, truncated, info)

    def _users_turns(self, upcoming: str) -> str | None:
        """Let the user answer until it is the agent's turn again; the termination reason, or None to go on."""
        assert self._user is not None
        while upcoming == "user":
            agent_text = next((m.get("content") or "" for m in reversed(self.messages) if m.get("role") == "assistant"), "")
            move = self._user.move(agent_text, lambda: self._worker().request("user_view"))
            reply = self._worker().request("user", end=True) if move.end else self._worker().request("user", content=move.text)
            self.messages, upcoming = list(reply.get("messages") or []), str(reply.get("next"))
        return {"agent": None, "end": "user_stop", "limit": "max_messages"}.get(upcoming, "user_stop")

    def reference_action(self) -> Any:
        """The reference agent's next turn, as an action ``step`` accepts."""
        reply = self._worker().request("reference")
        if reply.get("stop"):
            return AGENT_STOP
        if reply.get("tool_calls"):
            calls = [{"type": "function", "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {})}} for c in reply["tool_calls"]]
            return {"role": "assistant", "content": None, "tool_calls": calls}
        return str(reply.get("content") or "")

    def _finish(self, termination: str, failure: str | None, info: dict[str, Any]) -> float:
        assert self.task is not None
        detail: dict[str, Any] = {"total": 0.0, "components": {}, "gates": {}, "weights": {}, "notes": {}, "fully_judged": True}
        if failure is None:
            try:
                graded = self._worker().request("evaluate")
            except TargetInfraError as exc:
                termination, failure = "infrastructure_error", f"while grading: {exc}"
            else:
                similarity = min(1.0, max(0.0, float(graded["similarity"])))
                keep = ("milestone_similarity", "minefield_similarity", "turn_count", "milestone_mapping", "minefield_mapping", "milestones", "minefields")
                detail.update({k: graded.get(k) for k in keep})
                detail.update(total=similarity, similarity=similarity, perfect=similarity >= PERFECT, evaluator="toolsandbox",
                              components={"similarity": similarity}, categories=(self.task.description or {}).get("categories"))  # fmt: skip
        if failure is not None:
            detail.update(total=0.0, fully_judged=False, notes={"error": failure})
            info["infrastructure_error"] = " ".join(failure.split())
        info.update(reward_components=dict(detail["gates"]), reward_detail=detail, ended_by=termination, termination_reason=termination,
                    messages=list(self.messages), task_id=self.task.id)  # fmt: skip
        if _ACTIVE.__dict__.get("runner") is self:
            _ACTIVE.runner = None
        return float(detail["total"])

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None
