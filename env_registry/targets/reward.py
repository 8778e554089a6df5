"""The τ²-bench reward of one episode, with every part that could not be checked said so, never guessed.

τ² multiplies one 0/1 score per entry of the task's ``reward_basis``:

- ``DB``: the database hash after the episode equals the hash after replaying the gold actions on a
  fresh state;
- ``COMMUNICATE``: every ``communicate_info`` string appears in some agent message (case-insensitive,
  commas removed from the message);
- ``ACTION``: every gold action appears among the agent's tool calls (``compare_args`` rule);
- ``NL_ASSERTION``: an LLM judge finds every natural-language assertion met (a task with none scores 1);
- ``ENV_ASSERTION``: assertions run against τ²'s own environment objects.

An episode that did not end with the agent or the user stopping scores 0, as in τ². A part that cannot
be checked here (no judge configured, a server whose state cannot be read, env assertions over MCP) is
listed under ``not_judged`` with the reason, and the reward is the product of the parts that were checked;
``fully_judged`` says whether that is all of them.

The result has the shape of :class:`trace_env.sdk.Reward` (``total``, ``components``, ``gates``,
``weights``, ``notes``) so consumers of synthetic envs read it unchanged; τ²'s parts multiply, so they
are gates.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from env_registry.targets.backend import Replay
from env_registry.targets.tasks import Task

STOPPED = ("agent_stop", "user_stop")
KNOWN_BASES = ("DB", "ENV_ASSERTION", "ACTION", "COMMUNICATE", "NL_ASSERTION")


def communicate_checks(task: Task, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    infos = (task.evaluation_criteria.communicate_info if task.evaluation_criteria else None) or []
    texts = [m.get("content") or "" for m in messages if m.get("role") == "assistant"]
    checks = []
    for info in infos:
        needle = str(info).lower()
        met = any(needle in text.lower().replace(",", "") for text in texts if text)
        checks.append({"info": info, "met": met})
    return checks


def agent_tool_calls(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except (json.JSONDecodeError, TypeError):
                arguments = None
            if isinstance(arguments, dict):
                calls.append((str(function.get("name")), arguments))
    return calls


def action_checks(task: Task, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    calls = agent_tool_calls(messages)
    return [
        {"name": action.name, "arguments": action.arguments, "met": any(action.matches(n, a) for n, a in calls)}
        for action in task.gold_actions
    ]


def grade_episode(
    task: Task,
    messages: list[dict[str, Any]],
    termination_reason: str,
    *,
    final_hash: Callable[[], str | None],
    gold: Callable[[], Replay],
    judge: Callable[[list[dict[str, Any]], list[str]], dict[str, Any]] | None = None,
    unreadable: str = "the target's state cannot be read",
) -> dict[str, Any]:
    """Grade a finished episode. ``final_hash``/``gold`` are called only when the DB part is graded."""
    criteria = task.evaluation_criteria
    basis = list(dict.fromkeys(task.reward_basis))
    detail: dict[str, Any] = {
        "total": 0.0,
        "components": {},
        "gates": {},
        "weights": {},
        "notes": {},
        "reward_basis": basis,
        "not_judged": {},
        "judged_by": {},
        "fully_judged": True,
    }
    if termination_reason not in STOPPED:
        detail["notes"]["premature"] = f"the episode ended by {termination_reason}; τ² scores such episodes 0"
        return detail
    if criteria is None:
        detail.update(total=1.0)
        detail["notes"]["criteria"] = "the task has no evaluation criteria"
        return detail
    gates: dict[str, float] = {}
    not_judged: dict[str, str] = detail["not_judged"]
    for part in basis:
        if part == "DB":
            replay = gold()
            end = final_hash()
            detail["db"] = {"final_hash": end, "gold_hash": replay.hash, "gold_errors": replay.errors}
            if replay.hash is None or end is None:
                not_judged["DB"] = replay.unreadable or unreadable
            else:
                gates["DB"] = 1.0 if end == replay.hash else 0.0
        elif part == "COMMUNICATE":
            checks = communicate_checks(task, messages)
            detail["communicate_checks"] = checks
            gates["COMMUNICATE"] = 1.0 if all(c["met"] for c in checks) else 0.0
        elif part == "ACTION":
            checks = action_checks(task, messages)
            detail["action_checks"] = checks
            gates["ACTION"] = 1.0 if all(c["met"] for c in checks) else 0.0
        elif part == "NL_ASSERTION":
            assertions = list(criteria.nl_assertions or [])
            if not assertions:
                gates["NL_ASSERTION"] = 1.0
                detail["notes"]["NL_ASSERTION"] = "the task has no NL assertions"
            elif judge is None:
                not_judged["NL_ASSERTION"] = f"{len(assertions)} NL assertion(s) need an LLM judge; none was configured (--judge)"
            else:
                verdict = judge(messages, assertions)
                detail["nl_checks"] = verdict.get("checks", [])
                if verdict.get("error"):
                    not_judged["NL_ASSERTION"] = f"the judge failed: {verdict['error']}"
                else:
                    gates["NL_ASSERTION"] = 1.0 if all(c.get("met") for c in detail["nl_checks"]) else 0.0
                    detail["judged_by"]["NL_ASSERTION"] = verdict.get("judge", "llm")
        elif part == "ENV_ASSERTION":
            not_judged["ENV_ASSERTION"] = "env assertions run on τ²-bench's own environment; use the native backend"
        else:
            not_judged[part] = f"unknown reward basis {part!r} (known: {', '.join(KNOWN_BASES)})"
    total = 1.0
    for score in gates.values():
        total *= score
    if not gates and not_judged:  # nothing could be checked: no score to give, and certainly not a pass
        total = 0.0
        detail["notes"]["nothing_judged"] = "no part of the reward basis could be checked"
    detail.update(total=total, gates=gates, fully_judged=not not_judged)
    return detail
