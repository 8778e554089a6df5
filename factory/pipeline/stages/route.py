"""Stage 5, route: the routing menu (one demo per capability, played in the sandbox), saved once for the
evaluation, and the router's decisions on the rollout tasks; with ``route.accuracy``, its accuracy against
the capabilities the analysis found lacking in each failed rollout (``factory route --eval``).

Writes menu.json, decisions.jsonl, and routing_eval.json with confusion.png.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from factory.pipeline.config import PipelineConfig
from factory.pipeline.handoffs import AnalyzeOutput, RolloutsOutput, RouteOutput, TrainOutput
from factory.pipeline.digests import tree_digest, value_digest
from factory.pipeline.stages.base import Stage, StageContext, StageError, model_key
from factory.pipeline.state import Handoff


def adapter_dirs(ctx: StageContext) -> dict[str, Path]:
    """Each trained adapter's folder, as the train stage handed it on."""
    trained = ctx.read(TrainOutput)
    missing = sorted(set(trained.adapters) - set(trained.paths))
    if missing:
        raise StageError(f"the train stage's record names no folder for {', '.join(missing)}; run `factory run --force train`")
    return {name: ctx.path(trained.paths[name]) for name in trained.adapters}


def rollout_files(ctx: StageContext) -> list[Path]:
    return [ctx.run_dir / "rollouts" / name / "trajectories.jsonl" for name in ctx.read(RolloutsOutput).trajectories]


class RouteStage(Stage):
    name = "route"
    needs = {"train": ("adapters",), "build": ("envs",), "analyze": None, "rollouts": ("trajectories",)}

    def section(self, config: PipelineConfig) -> Any:
        return {"route": config.route.model_dump(), "model": model_key(config)}

    def run(self, ctx: StageContext) -> Handoff:
        from env_registry.registry import Registry
        from factory.analyze.importers import load_trajectories
        from schemas.capability import load_capability_report
        from router.decide import Router
        from router.loading import load_base_model
        from router.menu import build_menu, save_menu

        adapters = adapter_dirs(ctx)
        report = load_capability_report(ctx.run_dir / "analyze" / "capabilities.json")
        order = [p.name for p in ctx.read(AnalyzeOutput).plan if p.name in adapters]
        menu = build_menu(adapters=adapters, report=report, registry=Registry(ctx.config.registry_path()), capabilities=order,
                          backend=ctx.config.sandbox, progress=lambda name, done, total: ctx.progress("route · menu demos", done, total))  # fmt: skip
        menu_file = save_menu(menu, ctx.folder / "menu.json")
        config = ctx.config.route.router_config()
        model, tokenizer = load_base_model(ctx.model(), device=ctx.config.device, dtype=ctx.config.dtype)
        router = Router(model, tokenizer, menu, config)
        trajectories = load_trajectories(rollout_files(ctx)).trajectories
        firsts = list({t.task_id + "@" + t.target: t for t in trajectories}.values())  # one per task: trials open alike
        decisions = router.route_many([(t.id, t) for t in firsts], progress=lambda d, t: ctx.progress("route · rollout tasks", d, t))
        with (ctx.folder / "decisions.jsonl").open("w", encoding="utf-8") as handle:
            for trajectory, decision in zip(firsts, decisions):
                handle.write(json.dumps({"target": trajectory.target, "task_id": trajectory.task_id, **decision.model_dump(mode="json", exclude={"orders", "task_id"})}) + "\n")
        info: dict[str, Any] = {"routes": dict(Counter(d.choice or "(base)" for d in decisions)), "tasks": len(decisions),
                                "labels": dict(zip(menu.keys, router.labels)), "notes": menu.notes}  # fmt: skip
        if ctx.config.route.accuracy:
            info["accuracy"] = self._accuracy(ctx, router, trajectories)
        menu_digest = value_digest(menu.model_dump(mode="json", exclude={"created_at"}))
        return RouteOutput(menu=menu_digest, router=config).handoff({ctx.rel(menu_file): tree_digest(menu_file)}, info)

    def _accuracy(self, ctx: StageContext, router: Any, trajectories: list[Any]) -> dict[str, Any]:
        """Routing accuracy on the failed rollouts the analysis labeled; skipped (and said why) without any."""
        from router.charts import confusion_png
        from router.errors import RouterError
        from router.evaluate import evaluate_routing, read_labels

        try:
            labels_file, runs = read_labels(ctx.run_dir / "analyze" / "labels.jsonl")
            report = evaluate_routing(router, trajectories, runs, str(labels_file), "skip",
                                      progress=lambda d, t: ctx.progress("route · accuracy", d, t))  # fmt: skip
        except RouterError as exc:
            return {"n_evaluated": 0, "note": str(exc)}
        (ctx.folder / "routing_eval.json").write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
        chart = confusion_png(report, ctx.folder / "confusion.png") if report.n_evaluated else None
        note = None if report.n_evaluated else "no failed rollout lacks a capability on the menu, so there is nothing to score"
        return {"n_evaluated": report.n_evaluated, "correct": report.correct, "accuracy": report.accuracy,
                "majority_baseline": report.majority_baseline, "chart": ctx.rel(chart) if chart else None, "note": note}  # fmt: skip

