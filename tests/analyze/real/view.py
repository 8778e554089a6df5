"""Prints a compact view of the stored real trajectories for reading by hand (how ``labels.jsonl`` was made):
the task's instructions and gold actions, τ²'s reward breakdown, then the conversation with tool calls and
short results. ``python3 -m tests.analyze.real.view [--failures] [ID_PREFIX ...]``."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data"


def _short(text: object, n: int) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= n else s[: n - 3] + "..."


def records() -> list[tuple[str, dict, dict]]:
    out = []
    for path in sorted(DATA.glob("*.json.gz")):
        name = path.name[: -len(".json.gz")]
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            results = json.load(fh)
        tasks = {t["id"]: t for t in results["tasks"]}
        for sim in results["simulations"]:
            out.append((f"{name}:{sim['task_id']}#{sim.get('trial', 0)}", sim, tasks[sim["task_id"]]))
    return out


def show(tid: str, sim: dict, task: dict) -> str:
    lines = [f"=== {tid}  reward={sim['reward_info'].get('reward')}  end={sim.get('termination_reason')}"]
    us = task.get("user_scenario", {}).get("instructions", {})
    if isinstance(us, dict):
        for k in ("reason_for_call", "known_info", "unknown_info", "task_instructions"):
            if us.get(k):
                lines.append(f"  {k}: {_short(us[k], 600)}")
    else:
        lines.append(f"  instructions: {_short(us, 800)}")
    crit = task.get("evaluation_criteria") or {}
    reads = [a["name"] for a in crit.get("actions") or [] if a["name"].startswith(("get_", "find_", "search_", "list_", "calculate"))]
    if reads:
        lines.append(f"  GOLD reads: {len(reads)}")
    for a in crit.get("actions") or []:
        if a["name"] not in reads:
            lines.append(f"  GOLD {a['name']}({_short(json.dumps(a.get('arguments')), 300)})")
    if crit.get("communicate_info"):
        lines.append(f"  COMMUNICATE {crit['communicate_info']}")
    ri = sim["reward_info"]
    if ri.get("db_check"):
        lines.append(f"  db_match={ri['db_check'].get('db_match')}")
    for c in ri.get("action_checks") or []:
        if not c.get("action_match"):
            if c["action"]["name"].startswith(("get_", "find_", "search_", "list_", "calculate")):
                continue
            lines.append(f"  MISSED {c['action']['name']}({_short(json.dumps(c['action'].get('arguments')), 200)})")
    for c in ri.get("communicate_checks") or []:
        if not c.get("met"):
            lines.append(f"  NOT_COMMUNICATED {c.get('info')}")
    for i, m in enumerate(sim["messages"]):
        role = m["role"]
        if role == "user" and m.get("content"):
            lines.append(f"  [{i}] U: {_short(m['content'], 330)}")
        elif role == "assistant":
            if m.get("content"):
                lines.append(f"  [{i}] A: {_short(m['content'], 420)}")
            for c in m.get("tool_calls") or []:
                lines.append(f"  [{i}] A> {c['name']}({_short(json.dumps(c.get('arguments')), 220)})")
        elif role == "tool":
            lines.append(f"  [{i}]   <{'ERR ' if m.get('error') else ''}{_short(m.get('content'), 130)}")
    return "\n".join(lines)


if __name__ == "__main__":
    args = sys.argv[1:]
    only_fail = "--failures" in args
    prefixes = [a for a in args if not a.startswith("--")]
    for tid, sim, task in records():
        if only_fail and sim["reward_info"].get("reward", 0) >= 1 - 1e-6:
            continue
        if prefixes and not any(tid.startswith(p) for p in prefixes):
            continue
        print(show(tid, sim, task))
