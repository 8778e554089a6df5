"""Stage 1, rollouts: the untrained agent on each target, with ``factory rollout``'s engine and folder format.

Writes ``rollouts/<target>/`` (trajectories.jsonl, run.json, summary.json) plus ``tasks.json``, the exact
task objects that ran, so the analysis checks task versions without the server package's files.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from collections.abc import Iterator
from typing import Any

from factory.evaluate.runner import task_ids
from schemas.errors import Interrupted
from factory.pipeline.config import PipelineConfig
from factory.pipeline.handoffs import RolloutsOutput
from factory.pipeline.digests import tree_digest
from factory.pipeline.stages.base import Stage, StageContext, StageError, model_key
from factory.pipeline.state import Handoff


@contextmanager
def llm_base_url(url: str | None) -> Iterator[None]:
    """LLM policies find their server through ``TRACE_LLM_BASE_URL`` (as with ``factory rollout``)."""
    old = os.environ.get("TRACE_LLM_BASE_URL")
    if url:
        os.environ["TRACE_LLM_BASE_URL"] = url
    try:
        yield
    finally:
        if url:
            os.environ.pop("TRACE_LLM_BASE_URL", None) if old is None else os.environ.__setitem__("TRACE_LLM_BASE_URL", old)


class RolloutsStage(Stage):
    name = "rollouts"

    def section(self, config: PipelineConfig) -> Any:
        policy = config.rollouts.policy or f"hf:{model_key(config)}"
        return {
            "targets": [t.model_dump() for t in config.targets], "policy": policy, "seed": config.seed,
            "rollouts": config.rollouts.model_dump(exclude={"concurrency", "policy"}),
        }  # fmt: skip

    def run(self, ctx: StageContext) -> Handoff:
        from factory.rollout.engine import Rollout, RolloutConfig
        from factory.rollout.load import load_policy

        c, r = ctx.config, ctx.config.rollouts
        spec = r.policy or f"hf:{ctx.model()}"
        value = RolloutsOutput()
        files: dict[str, str] = {}
        info: dict[str, Any] = {"policy": spec, "summaries": {}}
        with llm_base_url(r.base_url):
            policy = load_policy(spec, temperature=r.temperature, max_tokens=r.max_tokens)
            if spec.startswith("hf:") and c.device != "cpu":  # hf: policies load on the CPU; the config says where to run
                policy.model.to(c.device)  # type: ignore[attr-defined]
            try:
                for target in c.targets:
                    out = ctx.folder / target.name
                    config = RolloutConfig(
                        **r.model_dump(exclude={"policy", "base_url"}), target=target.name, out=out, policy=spec,
                        tasks_file=target.tasks_file, task_ids=task_ids(target), seed=c.seed,
                    )
                    label = f"rollouts · {target.name}"
                    runner = Rollout(config, policy=policy, stop=ctx.stop, progress=lambda d, t, p, label=label: ctx.progress(label, d, t))
                    tasks = out / "tasks.json"
                    out.mkdir(parents=True, exist_ok=True)
                    tasks.write_text(json.dumps([t.model_dump(mode="json", exclude_unset=True, by_alias=True) for t in runner.tasks], indent=1) + "\n", encoding="utf-8")
                    summary = runner.run()
                    if summary.interrupted:
                        raise Interrupted((runner.stopped_by or 130) - 128)  # which signal: 130 or 143 at the end
                    if summary.episodes and summary.errors == summary.episodes:
                        first = summary.error_examples[0].message if summary.error_examples else "unknown error"
                        raise StageError(f"every rollout on {target.name} ended in an error ({first})")
                    trajectories = out / "trajectories.jsonl"
                    value.trajectories[target.name] = files[ctx.rel(trajectories)] = tree_digest(trajectories)
                    files[ctx.rel(tasks)] = tree_digest(tasks)
                    info["summaries"][target.name] = summary.model_dump(include={"tasks", "episodes", "passed", "failed", "errors", "pass_rate", "mean_reward", "duration_s"})
            finally:
                policy.close()
        return value.handoff(files, info)
