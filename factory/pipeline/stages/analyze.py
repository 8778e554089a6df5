"""Stage 2, analyze: ``factory analyze`` on the rollouts, then the build plan - the selected capabilities
(at most ``max_capabilities``, by coverage), or the config's ``fallback`` list when nothing is selected.

Writes what ``factory analyze --out`` writes (capabilities.json, report.md, coverage.png, labels.jsonl) and
``plan.json``. Later stages depend on the plan and the labels, not on the report's timestamps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factory.pipeline.config import PipelineConfig
from factory.pipeline.handoffs import AnalyzeOutput, PlannedCapability, RolloutsOutput
from factory.pipeline.digests import tree_digest
from factory.pipeline.stages.base import Stage, StageContext, StageError
from factory.pipeline.state import Handoff


def build_plan(report: Any, config: PipelineConfig) -> tuple[list[PlannedCapability], str]:
    """The capabilities to build, and where they came from: 'analysis' or 'fallback'."""
    from factory.build import BuildError, resolve_capability, resolve_target

    a = config.analyze
    chosen = [(f.name, None, None) for f in report.capabilities][: a.max_capabilities]
    source = "analysis"
    if not chosen:
        chosen = [(f.name, f.description, f.target) for f in a.fallback]
        source = "fallback"
    plan = []
    for name, description, target in chosen:
        try:
            capability = resolve_capability(name, description, report)
            plan.append(PlannedCapability(name=name, description=capability.description, target=resolve_target(name, target, report)))
        except BuildError as exc:
            raise StageError(f"analyze.fallback {name!r}: {exc}") from None
    return plan, source


class AnalyzeStage(Stage):
    name = "analyze"
    needs = {"rollouts": ("trajectories",)}

    def section(self, config: PipelineConfig) -> Any:
        return config.analyze.model_dump(exclude={"concurrency"})

    def run(self, ctx: StageContext) -> Handoff:
        from factory.analyze.importers import load_trajectories
        from factory.analyze.pipeline import AnalyzeConfig, analyze
        from factory.analyze.report import write_outputs
        from factory.analyze.tasks import load_tasks

        a = ctx.config.analyze
        folders = [ctx.run_dir / "rollouts" / name for name in ctx.read(RolloutsOutput).trajectories]
        paths = [f / "trajectories.jsonl" for f in folders]
        imported = load_trajectories(paths)
        tasks = load_tasks([f / "tasks.json" for f in folders])
        client = None
        if a.llm and a.llm.strip().lower() != "offline":
            from llm_clients.spec import make_client, parse_llm_spec

            client = make_client(parse_llm_spec(a.llm, base_url=a.base_url))
        runs = a.runs or (10 if client else 1)
        config = AnalyzeConfig(
            runs=runs, min_runs=a.min_runs if client else None, delta=a.delta, coverage=a.coverage, bootstrap=a.bootstrap,
            include_unattributable=a.include_unattributable, concurrency=a.concurrency, seed=ctx.config.seed,
        )  # fmt: skip
        result = analyze(imported.trajectories, config, client=client, tasks=tasks, sources=[str(p) for p in paths],
                         progress=lambda stage, done, total: ctx.progress(f"analyze · {stage}", done, total))  # fmt: skip
        written = write_outputs(result, ctx.folder, trajectories=imported.trajectories)
        plan, source = build_plan(result.report, ctx.config)
        if not plan:
            raise StageError(
                "the analysis selected no capability and analyze.fallback is empty: add capabilities to build, e.g. "
                "fallback = [\"precondition_verification\"], or roll out more tasks"
            )
        if source == "fallback":
            ctx.note(f"analysis selected no capability; building the fallback list: {', '.join(p.name for p in plan)}")
        (ctx.folder / "plan.json").write_text(json.dumps({"source": source, "capabilities": [p.model_dump() for p in plan]}, indent=2) + "\n", encoding="utf-8")
        labels = Path(written["labels"])
        report = result.report
        info = {
            "source": source, "n_trajectories": report.n_trajectories, "n_successes": report.n_successes,
            "n_failures": report.n_failures, "n_unattributable": report.n_unattributable, "labeler": report.labeler,
            "selected": [{"name": f.name, "coverage": f.stats.coverage, "gap": f.stats.gap} for f in report.capabilities],
            "notes": report.notes, "coverage_chart": ctx.rel(written["coverage_chart"]) if "coverage_chart" in written else None,
        }  # fmt: skip
        files = {ctx.rel(Path(written["capabilities"])): tree_digest(Path(written["capabilities"])), ctx.rel(labels): tree_digest(labels)}
        return AnalyzeOutput(plan=plan, labels=tree_digest(labels)).handoff(files, info)
