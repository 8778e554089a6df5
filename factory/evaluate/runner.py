"""Host side: evaluate every arm on every target with the rollout engine, resumably, from one model load.

Layout under ``out``::

    eval.json                          what was evaluated (compared on resume)
    menu.json                          the routing menu (built once, reused on resume)
    arms/<arm>/<target>/               a `factory rollout` folder: trajectories.jsonl, run.json, summary.json
    arms/routed/decisions.jsonl        one routing decision per task, as made
    results.json, pass_rates.png       the comparison (ToolSandbox beside τ², in its own panel)
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from factory.evaluate.engines import Engine, open_engine
from factory.evaluate.schema import (
    ADAPTER_PREFIX, ARM_BASE, ARM_ROUTED, TOOLSANDBOX, EpisodeSettings, EvalConfig, EvalError, EvalReport, EvalTarget, arm_folder,
)  # fmt: skip
from factory.evaluate.scores import arm_result
from factory.pipeline.digests import tree_digest
from schemas.files import state_file_message, write_atomic
from schemas.jsonl import jsonl_lines

SETTINGS_FILE = "eval.json"
RESULTS_FILE = "results.json"
MENU_FILE = "menu.json"
DECISIONS_FILE = "decisions.jsonl"
CHART_FILE = "pass_rates.png"

Progress = Callable[[str, int, int, int], None]
"""progress(label, done, total, passed) after each episode; label is 'arm · target'."""


def task_ids(target: EvalTarget) -> list[str] | None:
    """The ids to run: ``task_ids`` (validated by the rollout), cut to ``limit``; None means all."""
    if target.limit is None:
        return target.task_ids
    if target.task_ids is not None:
        return target.task_ids[: target.limit]
    from env_registry.targets.catalog import TOOLSANDBOX, resolve_target, spec_tasks

    spec = resolve_target(target.name, tasks_file=target.tasks_file, backend="auto" if target.name == TOOLSANDBOX else "mcp")
    return [task.id for task in spec_tasks(spec)[: target.limit]]


def adapter_paths(config: EvalConfig) -> dict[str, Path]:
    from router.loading import parse_adapter_flags

    return parse_adapter_flags(f"{name}={path}" for name, path in config.adapters.items())


def settings(config: EvalConfig, adapters: dict[str, Path], model: str) -> dict[str, Any]:
    """What the numbers mean: changing any of it makes earlier results of this folder another evaluation.
    Arms and targets are left out: each has its own folder, so adding one (or tasks) reuses the rest."""
    kept = config.model_dump(mode="json", exclude={
        "out", "concurrency", "sandbox", "registry", "device", "menu", "capabilities", "adapters", "model", "arms", "targets",
    })  # fmt: skip
    kept["model"] = model
    kept["adapters"] = {name: tree_digest(path) for name, path in sorted(adapters.items())}
    for key in ("menu", "capabilities"):
        value = getattr(config, key)
        kept[key] = tree_digest(Path(value)) if value and Path(value).is_file() else None
    return kept


def prepare(out: Path, wanted: dict[str, Any], fresh: bool) -> None:
    """Start, resume or refuse: an existing folder must hold this same evaluation (or be discarded)."""
    path = out / SETTINGS_FILE
    if fresh:
        for name in ("arms", SETTINGS_FILE, RESULTS_FILE, MENU_FILE, CHART_FILE):
            target = out / name
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    if path.exists():
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(before, dict):
                raise ValueError(f"(top level): not a JSON object (got {type(before).__name__})")
        except (OSError, ValueError) as exc:
            raise EvalError(state_file_message(path, exc, "pass --fresh to start over")) from None
        changed = sorted(k for k in set(before) | set(wanted) if before.get(k) != wanted.get(k))
        if changed:
            raise EvalError(
                f"{out} holds an evaluation with other settings ({', '.join(changed)} changed); "
                f"pass --fresh to discard it or choose another --out"
            )
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(wanted, indent=2, sort_keys=True) + "\n", encoding="utf-8")


class DecisionLog:
    """Routing decisions appended as they are made; the latest per (target, task) counts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()

    def record(self, target: str, task_id: str, decision: Any) -> None:
        line = json.dumps({"target": target, **decision.model_dump(mode="json", exclude={"orders"}), "task_id": task_id})
        with self.lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line + "\n")

    def routes(self, wanted: dict[str, set[str]]) -> dict[str, int]:
        """Tasks per option (capability or '(base)') among the tasks evaluated."""
        from router.schema import NO_ADAPTER

        latest: dict[tuple[str, str], str] = {}
        if self.path.exists():
            for line in jsonl_lines(self.path.read_text(encoding="utf-8")):
                try:
                    record = json.loads(line)
                    latest[(record["target"], record["task_id"])] = record.get("choice") or NO_ADAPTER
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by a kill
        return dict(Counter(c for (t, task), c in latest.items() if task in wanted.get(t, set())))


def run_eval(
    config: EvalConfig,
    *,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
    fresh: bool = False,
    menu_progress: Callable[[str, int, int], None] | None = None,
) -> EvalReport:
    """Run every arm on every target; returns the report and writes ``results.json`` and the chart."""
    from env_registry.targets.runner import GoldCache
    from factory.rollout.engine import Rollout, RolloutConfig
    from factory.rollout.store import RolloutStore
    from router.loading import adapter_base_model

    started = time.monotonic()
    adapters = adapter_paths(config)
    model = config.model or adapter_base_model(adapters)
    if not model:
        raise EvalError("no base model: pass --model (the adapters' configs do not name one)")
    ids = {t.name: task_ids(t) for t in config.targets}
    out = Path(config.out)
    prepare(out, settings(config, adapters, model), fresh)
    log = DecisionLog(out / "arms" / arm_folder(ARM_ROUTED) / DECISIONS_FILE)
    engine: Engine = open_engine(config, model, adapters, out / MENU_FILE, log, menu_progress)
    stop = stop or threading.Event()
    gold = {t.name: GoldCache() for t in config.targets}
    results = []
    try:
        for arm in config.arm_ids():
            summaries, wanted, episodes = [], {}, {}
            for target in config.targets:
                policy = engine.policy(arm, target.name)
                rollout_config = RolloutConfig(
                    **config.model_dump(include=set(EpisodeSettings.model_fields)), target=target.name, policy=policy.spec,
                    out=out / "arms" / arm_folder(arm) / target.name, tasks_file=target.tasks_file, task_ids=ids[target.name],
                    seed=config.seed,
                )
                label = f"{arm} · {target.name}"
                tick = (lambda d, t, p, label=label: progress(label, d, t, p)) if progress else None
                runner = Rollout(rollout_config, policy=policy, progress=tick, stop=stop, gold_cache=gold[target.name])
                summary = runner.run()
                if summary.interrupted:
                    raise KeyboardInterrupt
                summaries.append(summary)
                wanted[target.name] = {task.id for task in runner.tasks}
                if target.name == TOOLSANDBOX:  # its intervals need every episode's similarity
                    episodes[target.name] = RolloutStore.load(rollout_config.out)
            kind = "base" if arm == ARM_BASE else "routed" if arm == ARM_ROUTED else "adapter"
            adapter = arm.removeprefix(ADAPTER_PREFIX) if kind == "adapter" else None
            routes = log.routes(wanted) if kind == "routed" else None
            spec = engine.policy(arm, config.targets[0].name).spec
            results.append(arm_result(arm, kind, spec, str(out / "arms" / arm_folder(arm)), summaries, adapter, routes, episodes))
    finally:
        engine.close()
    report = EvalReport(
        out=str(out), model=model, engine=config.engine, targets=[t.name for t in config.targets], arms=results,
        notes=notes(config, results), seconds=round(time.monotonic() - started, 2),
    )  # fmt: skip
    if TOOLSANDBOX in report.targets:
        report.toolsandbox = {"available": True, "note": "ToolSandbox: mean similarity and perfect scenarios by its own evaluator, 95% intervals"}
    report.chart = draw(report, out / CHART_FILE)
    write_atomic(out / RESULTS_FILE, report.model_dump_json(indent=2) + "\n")  # last, whole or not at all
    return report


def notes(config: EvalConfig, results: list[Any]) -> list[str]:
    out = []
    partial = sum(d.not_fully_judged for r in results for d in r.domains)
    if partial:
        out.append(f"{partial} episode(s) were graded on part of their reward basis (NL assertions need a judge: set --judge)")
    errors = sum(r.errors for r in results)
    if errors:
        out.append(f"{errors} episode(s) ended in an error (target, user or policy failure) and are left out of the rates")
    tau2 = [t.name for t in config.targets if t.name != TOOLSANDBOX]
    if len(tau2) == 1:
        out.append(f"overall covers {tau2[0]} only; the paper's τ² overall is over airline and retail together")
    skipped = {reason: n for r in results[:1] for d in r.domains for reason, n in d.skipped.items()}
    for reason, count in skipped.items():
        out.append(f"toolsandbox: {count} scenario(s) skipped: they {reason}")
    return out


def draw(report: EvalReport, path: Path) -> str | None:
    try:
        from factory.evaluate.charts import pass_rate_chart
    except ImportError:  # matplotlib is optional: the numbers are in results.json anyway
        return None
    return str(pass_rate_chart(report, path))

