"""Stage 6, eval: ``factory eval`` with the trained adapters and the route stage's menu and router
settings: the base model, each adapter alone and the routed set on the eval targets."""

from __future__ import annotations

from typing import Any

from factory.pipeline.config import PipelineConfig
from factory.pipeline.handoffs import EvalOutput, RouteOutput
from factory.pipeline.digests import tree_digest
from factory.pipeline.stages.base import Stage, StageContext, StageError, model_key
from factory.pipeline.stages.route import adapter_dirs
from factory.pipeline.state import Handoff


class EvalStage(Stage):
    name = "eval"
    needs = {"train": ("adapters",), "route": None}

    def section(self, config: PipelineConfig) -> Any:
        return {
            "eval": config.eval.model_dump(exclude={"concurrency", "targets"}), "targets": [t.model_dump() for t in config.eval_targets()],
            "model": model_key(config), "seed": config.seed,
        }  # fmt: skip

    def run(self, ctx: StageContext) -> Handoff:
        from factory.evaluate.runner import RESULTS_FILE, run_eval
        from factory.evaluate.schema import EvalConfig

        e = ctx.config.eval
        config = EvalConfig(
            **e.model_dump(exclude={"targets"}), targets=ctx.config.eval_targets(), out=ctx.folder, model=ctx.model(),
            adapters={k: str(v) for k, v in adapter_dirs(ctx).items()}, menu=str(ctx.run_dir / "route" / "menu.json"),
            registry=str(ctx.config.registry_path()), sandbox=ctx.config.sandbox,
            router=ctx.read(RouteOutput).router, device=ctx.config.device,
            dtype=ctx.config.dtype, seed=ctx.config.seed,
        )
        report = run_eval(config, progress=lambda label, d, t, p: ctx.progress(f"eval · {label}", d, t), stop=ctx.stop, fresh=not ctx.resume)
        if all(d.passed + d.failed == 0 for arm in report.arms for d in arm.domains):  # τ² and ToolSandbox alike
            raise StageError(f"every eval episode ended in an error; see the trajectories under {ctx.folder / 'arms'}")
        results = ctx.folder / RESULTS_FILE
        value = EvalOutput(pass_rates={arm.arm: arm.pass_rate for arm in report.arms})
        return value.handoff({ctx.rel(results): tree_digest(results)}, {"report": report.model_dump(mode="json")})
