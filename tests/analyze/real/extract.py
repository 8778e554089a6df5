"""Builds ``data/*.json.gz`` (a compact subset of real τ²-bench trajectories) and ``split.json`` from τ²-bench's
public repository (MIT licence, Sierra Research: github.com/sierra-research/tau2-bench), fetched as a git dir.

Run once, by hand: ``python3 -m tests.analyze.real.extract GIT_DIR``. The subset and the tune/holdout split are
drawn with a fixed seed (34) before any rule is run on them; the split is stratified by source and outcome.
Each stored file keeps its source's ``info``, the tasks its simulations use and the chosen simulations whole.

ToolOrchestra's files were drawn in the first round and then dropped, unread by any rule: their simulations'
``task_id`` does not match the conversation (another task's user, graded against that other task). A second
round (seed 3402) then added two smaller sources and more retail successes, skipping any simulation whose
task's user id never appears in its conversation.

A third round (seed 3405), drawn after the first holdout had been scored, makes a fresh holdout (``holdout2``): sources
and agents not used before where the repository has them (whissle, the SFT GPT-4.1 on airline, a second Claude Opus
4.6 submission, Claude Sonnet 4.6, DeepSeek), skipping every simulation already in the set and every inconsistent one.
τ² publishes no retail failures beyond those already used (ToolOrchestra's are unusable), so retail adds successes only.
A fourth round (seed 3407), drawn after holdout2 had been scored and before any rule changed, makes ``holdout3``:
the sources never used before (a second GPT-5.4 ironforge run, and two adaptive-agent Claude Opus 4.6 submissions
whose files carry bare simulations: their ``info`` is filled with the domain, the model and the policy of the
repository's head, and their tasks are the head's), then unused simulations of sources already used. τ² still
publishes no unused retail failures, so retail adds successes only.
``current_tasks.json.gz`` is rebuilt from the repository's current task files for every task id used.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
SEED, SEED_2, SEED_3, SEED_4 = 34, 3402, 3405, 3407
DROPPED = {"airline_toolorchestra", "retail_toolorchestra"}
# (short name, path in tau2-bench, failures, successes)
SOURCES: list[tuple[str, str, int, int]] = [
    ("airline_gpt-4.1", "src/experiments/model_training/results/gpt-4.1_airline_default_gpt-4.1_1trials.json", 8, 4),
    ("airline_gpt-4o", "judge_viewer/data/simulations/azure-airline-full.json", 9, 5),
    ("airline_claude-sonnet-4-5", "web/leaderboard/public/submissions/claude-sonnet-4-5_aide-platform_2025-10-31/trajectories/claude-sonnet-4-5_airline_default_gpt4.1_1trials.json", 8, 5),
    ("airline_gpt-oss-120b", "web/leaderboard/public/submissions/gpt-oss-120b_openai_2025-11-26/trajectories/langchain_agent_airline_2025-11-26_00-37-06.json", 9, 5),
    ("airline_claude-opus-4-6", "web/leaderboard/public/submissions/button-claude-opus-4-6_distyl-ai_2026-03-04/trajectories/airline.json", 7, 4),
    ("airline_toolorchestra", "web/leaderboard/public/submissions/toolorchestra_nvidia_2025-12-02/trajectories/toolorchestra_airline_gpt-5_1trial.json", 6, 4),
    ("retail_gpt-4.1", "src/experiments/model_training/results/gpt-4.1_retail_defautl_gpt-4.1_1trials.json", 6, 6),
    ("retail_gpt-4.1-sft", "src/experiments/model_training/results/ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm_retail_default_gpt-4.1_1trials.json", 6, 6),
    ("retail_toolorchestra", "web/leaderboard/public/submissions/toolorchestra_nvidia_2025-12-02/trajectories/toolorchestra_retail_gpt-5_1trial.json", 14, 8),
]
SECOND_ROUND: list[tuple[str, str, int, int]] = [
    ("airline_grok-3", "web/leaderboard/public/submissions/ironshell-ironforge_ironshell-ui_2026-03-09/trajectories/ironshell_ironforge_grok3_wave2.json", 6, 2),
    ("airline_gpt-5.4", "web/leaderboard/public/submissions/ironshell-ironforge_ironshell-ui_2026-03-09/trajectories/ironshell_airline_gpt54_run1.json", 6, 4),
    ("retail_gpt-4.1", "src/experiments/model_training/results/gpt-4.1_retail_defautl_gpt-4.1_1trials.json", 0, 4),
    ("retail_gpt-4.1-sft", "src/experiments/model_training/results/ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm_retail_default_gpt-4.1_1trials.json", 0, 4),
    ("airline_o3", "web/leaderboard/public/submissions/ironshell-ironforge_ironshell-ui_2026-03-09/trajectories/ironshell_ironforge_o3_wave2.json", 6, 3),
]
SUB = "web/leaderboard/public/submissions/"
THIRD_ROUND: list[tuple[str, str, int, int]] = [
    ("airline_whissle", "results/whissle/airline_run1.json", 9, 3),
    ("airline_gpt-4.1-sft", "src/experiments/model_training/results/ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm_airline_default_gpt-4.1_1trials.json", 5, 3),
    ("airline_claude-opus-4-6-ironshell", SUB + "ironshell-ironforge_ironshell-ui_2026-03-09/trajectories/ironshell_airline_opus46_run1.json", 6, 3),
    ("airline_claude-sonnet-4-6", SUB + "ironshell-ironforge_ironshell-ui_2026-03-09/trajectories/ironshell_ironforge_v2_sonnet46.json", 4, 1),
    ("airline_deepseek-chat", SUB + "ironshell-ironforge_ironshell-ui_2026-03-09/trajectories/ironshell_ironforge_v3_deepseek.json", 2, 1),
    ("retail_gpt-4.1", "src/experiments/model_training/results/gpt-4.1_retail_defautl_gpt-4.1_1trials.json", 0, 2),
    ("retail_gpt-4.1-sft", "src/experiments/model_training/results/ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm_retail_default_gpt-4.1_1trials.json", 0, 2),
]
ADAPTIVE = SUB + "adaptive-agent_ironshell-ui_2026-03-22/trajectories/adaptive-agent_airline_claude-opus-4-6_1trial.json"
CASCATA = SUB + "adaptive-agent_community_2026-03-23/trajectories/adaptive_agent_airline_opus46_cascata.json"
FOURTH_ROUND: list[tuple[str, str, int, int]] = [
    ("airline_gpt-5.4-ironforge-v2", SUB + "ironshell-ironforge_ironshell-ui_2026-03-09/trajectories/ironshell_ironforge_v2_gpt54.json", 5, 2),
    ("airline_claude-opus-4-6-adaptive", ADAPTIVE, 1, 4),
    ("airline_claude-opus-4-6-cascata", CASCATA, 0, 2),
    ("airline_gpt-oss-120b", SUB + "gpt-oss-120b_openai_2025-11-26/trajectories/langchain_agent_airline_2025-11-26_00-37-06.json", 6, 1),
    ("airline_gpt-4o", "judge_viewer/data/simulations/azure-airline-full.json", 6, 1),
    ("airline_gpt-5.4", SUB + "ironshell-ironforge_ironshell-ui_2026-03-09/trajectories/ironshell_airline_gpt54_run1.json", 3, 0),
    ("airline_claude-opus-4-6", SUB + "button-claude-opus-4-6_distyl-ai_2026-03-04/trajectories/airline.json", 2, 0),
    ("airline_claude-sonnet-4-6", SUB + "ironshell-ironforge_ironshell-ui_2026-03-09/trajectories/ironshell_ironforge_v2_sonnet46.json", 1, 1),
    ("airline_deepseek-chat", SUB + "ironshell-ironforge_ironshell-ui_2026-03-09/trajectories/ironshell_ironforge_v3_deepseek.json", 1, 0),
    ("retail_gpt-4.1", "src/experiments/model_training/results/gpt-4.1_retail_defautl_gpt-4.1_1trials.json", 0, 2),
    ("retail_gpt-4.1-sft", "src/experiments/model_training/results/ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm_retail_default_gpt-4.1_1trials.json", 0, 2),
]
CURRENT_TASK_FILES = {"airline": "data/tau2/domains/airline/tasks.json", "retail": "data/tau2/domains/retail/tasks.json"}


def _consistent(sim: dict, task: dict) -> bool:
    """False when the task's user id is absent from the conversation (the simulation ran another task)."""
    ids = set(re.findall(r"[a-z]+_[a-z]+_\d{4}", json.dumps(task.get("user_scenario"))))
    said = " ".join((m.get("content") or "") + json.dumps(m.get("tool_calls") or "") for m in sim["messages"])
    return not ids or any(i in said for i in ids)


_OBJECTS: dict[str, str] = {}


def _blob(git_dir: str, path: str) -> dict:
    if git_dir not in _OBJECTS:
        _OBJECTS[git_dir] = subprocess.run(["git", "--git-dir", git_dir, "rev-list", "--all", "--objects", "--missing=allow-any"], capture_output=True, text=True, check=True).stdout
    sha = next(line.split(" ", 1)[0] for line in _OBJECTS[git_dir].splitlines() if line.endswith(" " + path))
    return json.loads(subprocess.run(["git", "--git-dir", git_dir, "cat-file", "-p", sha], capture_output=True, check=True).stdout)


def _draw(rng: random.Random, sims: list[dict], n_fail: int, n_ok: int, name: str, split: dict[str, str], only: str | None = None) -> list[dict]:
    ok = [s for s in sims if (s.get("reward_info") or {}).get("reward", 0) >= 1 - 1e-6]
    bad = [s for s in sims if s not in ok]
    chosen = rng.sample(bad, n_fail) + rng.sample(ok, n_ok)
    for group in (chosen[:n_fail], chosen[n_fail:]):
        ids = [f"{name}:{s['task_id']}#{s.get('trial', 0)}" for s in group]
        if only:
            split.update({i: only for i in ids})
            continue
        held = set(rng.sample(ids, round(len(ids) / 3)))
        split.update({i: ("holdout" if i in held else "tune") for i in ids})
    return chosen


def main(git_dir: str) -> None:
    (HERE / "data").mkdir(exist_ok=True)
    split: dict[str, str] = {}
    picked: dict[str, tuple[str, dict, list[dict]]] = {}
    rng = random.Random(SEED)
    for name, path, n_fail, n_ok in SOURCES:
        results = _blob(git_dir, path)
        chosen = _draw(rng, results["simulations"], n_fail, n_ok, name, split)
        if name in DROPPED:
            split = {k: v for k, v in split.items() if not k.startswith(name + ":")}
            continue
        picked[name] = (path, results, chosen)
    rng = random.Random(SEED_2)
    for name, path, n_fail, n_ok in SECOND_ROUND:
        results = picked[name][1] if name in picked else _blob(git_dir, path)
        tasks = {t["id"]: t for t in results.get("tasks", [])}
        taken = {id(s) for s in picked[name][2]} if name in picked else set()
        pool = [s for s in results["simulations"] if id(s) not in taken and _consistent(s, tasks[s["task_id"]])]
        chosen = _draw(rng, pool, n_fail, n_ok, name, split)
        picked[name] = (path, results, (picked[name][2] if name in picked else []) + chosen)
    rng = random.Random(SEED_3)
    for name, path, n_fail, n_ok in THIRD_ROUND:
        results = picked[name][1] if name in picked else _blob(git_dir, path)
        tasks = {t["id"]: t for t in results.get("tasks", [])}
        taken = {id(s) for s in picked[name][2]} if name in picked else set()
        pool = [s for s in results["simulations"] if id(s) not in taken and _consistent(s, tasks[s["task_id"]])]
        chosen = _draw(rng, pool, n_fail, n_ok, name, split, only="holdout2")
        picked[name] = (path, results, (picked[name][2] if name in picked else []) + chosen)
    rng = random.Random(SEED_4)
    for name, path, n_fail, n_ok in FOURTH_ROUND:
        results = picked[name][1] if name in picked else _with_info(git_dir, _blob(git_dir, path))
        tasks = {t["id"]: t for t in results.get("tasks", [])}
        taken = {id(s) for s in picked[name][2]} if name in picked else set()
        pool = [s for s in results["simulations"] if id(s) not in taken and s["task_id"] in tasks and _consistent(s, tasks[s["task_id"]])]
        chosen = _draw(rng, pool, n_fail, n_ok, name, split, only="holdout3")
        picked[name] = (path, results, (picked[name][2] if name in picked else []) + chosen)
    used_ids: dict[str, set[str]] = {}
    for name, (path, results, chosen) in picked.items():
        used = {s["task_id"] for s in chosen}
        used_ids.setdefault(name.split("_", 1)[0], set()).update(used)
        out = {"info": results.get("info", {}), "tasks": [t for t in results.get("tasks", []) if t["id"] in used], "simulations": chosen,
               "source": {"repository": "sierra-research/tau2-bench", "path": path, "licence": "MIT"}}
        _write_if_changed(HERE / "data" / f"{name}.json.gz", out)
    current = [t for domain, path in CURRENT_TASK_FILES.items() for t in _blob_at_head(git_dir, path) if t["id"] in used_ids.get(domain, set())]
    _write_if_changed(HERE / "current_tasks.json.gz", current)
    (HERE / "split.json").write_text(json.dumps(dict(sorted(split.items())), indent=0) + "\n")


def _with_info(git_dir: str, raw: dict | list) -> dict:
    """A Results file as the importer reads it: the adaptive-agent submissions publish bare simulations (a list, or
    ``simulations`` without ``info`` and ``tasks``); they ran in March 2026 on the airline domain with Claude Opus 4.6,
    so ``info`` is filled from that and the repository head's policy, and the tasks are the head's."""
    results = {"simulations": raw} if isinstance(raw, list) else dict(raw)
    if not results.get("info"):
        policy = subprocess.run(["git", "--git-dir", git_dir, "show", "HEAD:data/tau2/domains/airline/policy.md"], capture_output=True, text=True, check=True).stdout
        results["info"] = {"agent_info": {"implementation": "adaptive-agent", "llm": "claude-opus-4-6"},
                           "environment_info": {"domain_name": "airline", "policy": policy},
                           "note": "filled by extract.py: the published file has no info"}  # fmt: skip
    if not results.get("tasks"):
        results["tasks"] = _blob_at_head(git_dir, CURRENT_TASK_FILES["airline"])
    return results


def _blob_at_head(git_dir: str, path: str) -> list[dict]:
    return json.loads(subprocess.run(["git", "--git-dir", git_dir, "show", f"HEAD:{path}"], capture_output=True, check=True).stdout)


def _write_if_changed(target: Path, content: object) -> None:
    """Rewrite a stored file only when its content changes (gzip stamps the time, so bytes always would)."""
    if target.exists():
        with gzip.open(target, "rt", encoding="utf-8") as fh:
            if json.load(fh) == content:
                return
    with gzip.open(target, "wt", encoding="utf-8") as fh:
        json.dump(content, fh, separators=(",", ":"))


if __name__ == "__main__":
    main(sys.argv[1])
