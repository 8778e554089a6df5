"""Stage 4, train: one LoRA adapter per built env with the trainer's GRPO loop (``factory train``'s engine).

``train/<capability>/`` is the trainer's run folder (adapter/, metrics.jsonl, reward_curve.png,
checkpoints/, summary.json). An interrupted stage resumes each run from its last checkpoint; a finished
capability is not trained again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from schemas.errors import FactoryError
from factory.pipeline.config import PipelineConfig
from factory.pipeline.handoffs import BuildOutput, TrainOutput
from factory.pipeline.digests import tree_digest
from factory.pipeline.stages.base import Stage, StageContext, StageError, model_key
from factory.pipeline.state import Handoff


def point_gym_at(registry: Path) -> None:
    """Make every id of the run's registry resolve to it, even if this process registered the same id from
    another registry earlier (Gymnasium's registry is process-wide and keyed by id only). Through the one
    caller path, ``register_all``; an id already known keeps its spec and only changes root (never popped)."""
    from env_registry.registration import register_all

    register_all(registry, repoint=True)


class TrainStage(Stage):
    name = "train"
    needs = {"build": ("envs",)}

    def section(self, config: PipelineConfig) -> Any:
        return {"train": config.train, "model": model_key(config), "seed": config.seed}

    def run(self, ctx: StageContext) -> Handoff:
        try:
            from trainer.config import TrainConfig
            from trainer.loop import GRPORun
        except ImportError:
            raise StageError("the train stage needs the trainer (trainer.loop): install trace-factory with its train extra") from None
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the stage's own bar is the one to watch
        envs = ctx.read(BuildOutput).envs
        point_gym_at(ctx.config.registry_path())
        out_value = TrainOutput(adapters={})
        files: dict[str, str] = {}
        info: dict[str, Any] = {}
        failed: dict[str, str] = {}
        for name, env in envs.items():
            out = ctx.folder / name
            settings = {**ctx.config.train, "model": ctx.model(), "output_dir": str(out)}
            settings.setdefault("seed", ctx.config.seed)
            if ctx.config.sandbox != "auto":
                settings.setdefault("sandbox", ctx.config.sandbox)
            config = TrainConfig.model_validate(settings)
            if not self._finished(out):
                total = config.grpo.iterations + config.warm_start.steps
                rows = [0]

                def tick(row: Any, name: str = name, total: int = total, rows: list[int] = rows) -> None:
                    rows[0] += 1
                    ctx.progress(f"train · {name}", rows[0], total)

                try:
                    GRPORun(env.gym_id, config, on_iteration=tick).train(resume="auto")  # its own folder: resume if it can
                except FactoryError as exc:  # one env that cannot be trained never stops the others
                    failed[name] = " ".join(str(exc).split())
                    ctx.note(f"train: {name} was not trained ({failed[name]}); it is left out")
                    continue
            adapter = out / "adapter"
            out_value.adapters[name] = files[ctx.rel(adapter)] = tree_digest(adapter)
            out_value.paths[name] = ctx.rel(adapter)
            info[name] = {"gym_id": env.gym_id, "summary": _summary(out), "metrics": ctx.rel(out / "metrics.jsonl"),
                          "curve": ctx.rel(out / "reward_curve.png") if (out / "reward_curve.png").exists() else None}  # fmt: skip
        if not out_value.adapters:
            first = next(iter(failed.values()), "no env was built")
            raise StageError(f"no adapter was trained ({first}); see {ctx.folder}")
        return out_value.handoff(files, info)

    def check(self, handoff: Handoff, run_dir: Path) -> str | None:
        """A record without the adapter folders (written before they were handed on) runs the stage again: it
        finds every adapter finished and only writes the record."""
        value = handoff.value
        if not isinstance(value.get("paths"), dict) or set(value["paths"]) != set(value.get("adapters") or {}):
            return "its record does not name the adapter folders"
        return super().check(handoff, run_dir)

    @staticmethod
    def _finished(out: Path) -> bool:
        return (out / "summary.json").is_file() and (out / "adapter" / "adapter_config.json").is_file()


def _summary(out: Path) -> dict[str, Any]:
    from schemas.files import read_train_summary

    fix = "remove it and run again (the train stage then resumes from its last checkpoint)"
    return read_train_summary(out, fix) or {}  # the one reader of summary.json: damaged is exit 2, never {}
