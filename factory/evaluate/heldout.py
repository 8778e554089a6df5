"""``factory eval --env``: the base model and each adapter alone on a registered env's held-out seeds.

The same evaluation ``factory train`` reports during a run (``trainer.heldout``): the trainer's renderer,
batched engine and token layout, seeds the run never trained on, the env's own reward, a 95% bootstrap
interval over seeds. When an adapter is a ``factory train`` run folder, that run's settings (base model,
GGUF file, compact tools, tokens per turn, turn limit, held-out seeds and ``variants``) are taken from its
``run.json``, so the adapter is judged on the prompt it was trained on and the seeds its run held out; the
command's flags override them. Generated env code runs only in the sandbox (``trainer.envpool``), never here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from schemas.config_file import put
from schemas.errors import FactoryError, validation_message
from schemas.files import TRAIN_RUN_FILE, read_train_run, write_atomic
from factory.evaluate.schema import ADAPTER_PREFIX, ARM_BASE, EvalError
from trainer.heldout import HeldoutResult


class HeldoutArm(HeldoutResult):
    """One arm's held-out figures (``trainer.heldout.HeldoutResult``), named, with its difference from the base."""

    arm: str
    adapter: str | None = None
    delta: float | None = None
    error: str | None = None


class HeldoutReport(BaseModel):
    """What ``factory eval --env`` reports (``results.json``)."""

    env_id: str
    model: str
    gguf_file: str | None = None
    seeds: list[int]
    samples: int
    temperature: float
    compact_tools: bool
    max_new_tokens: int
    settings_from: str | None = None
    arms: list[HeldoutArm]
    out: str
    chart: str | None = None


def run_settings(adapter: str) -> dict[str, Any] | None:
    """The config of the ``factory train`` run an adapter folder belongs to (``<run>/adapter`` + ``<run>/run.json``),
    through the one reader of that file (:func:`schemas.files.read_train_run`)."""

    run = read_train_run(Path(adapter).parent, "pass --model and the settings as flags, or repair the file", EvalError)
    return dict(run.config) if run is not None else None


def heldout_config(env_id: str, adapters: dict[str, str], model: str | None, overrides: dict[str, Any]) -> tuple[Any, str | None]:
    """The training config the evaluation runs under, and which run's ``run.json`` it came from (None: defaults).

    The run of the adapter trained on this env's capability is preferred, else the first adapter's run.
    ``overrides`` holds dotted keys (``heldout.seeds``) for the flags given; ``None`` values are left alone."""
    from router.loading import adapter_base_model
    from trainer.config import TrainConfig
    from trainer.errors import TrainError

    capability = env_id.removeprefix("trace/").rsplit("-v", 1)[0]
    order = sorted(adapters, key=lambda name: name != capability)
    found = ((adapters[n], run_settings(adapters[n])) for n in order)
    source, settings = next(((path, config) for path, config in found if config is not None), (None, None))
    data = dict(settings or {})
    for key in ("output_dir", "trackers"):
        data.pop(key, None)
    if model:
        data.update(model=model, gguf_file=None if model != data.get("model") else data.get("gguf_file"))
    elif not data.get("model"):
        data["model"] = adapter_base_model({k: Path(v) for k, v in adapters.items()}) if adapters else None
    if not data.get("model"):
        raise EvalError("no base model: pass --model PATH (or adapters trained by `factory train`, whose run.json names it)")
    for key, value in overrides.items():
        if value is not None:
            put(data, key, value, EvalError)
    try:
        return TrainConfig.model_validate(data), str(Path(source).parent / TRAIN_RUN_FILE) if source else None
    except ValidationError as exc:
        raise EvalError(validation_message(exc)) from None
    except TrainError as exc:
        raise EvalError(str(exc)) from None


def run_heldout(env_id: str, config: Any, adapters: dict[str, str], arms: list[str], out: Path,
                settings_from: str | None = None, progress: Any = None) -> HeldoutReport:
    """Evaluate every arm on the same seeds; write ``results.json`` and ``heldout.png`` under ``out``.

    One arm whose adapter cannot be loaded is reported with its error count and the others go on."""
    from trainer.heldout import evaluate_adapter, heldout_seeds

    wanted: list[tuple[str, str | None]] = [(ARM_BASE, None)] if ARM_BASE in arms else []
    if "adapters" in arms:
        wanted += [(ADAPTER_PREFIX + name, path) for name, path in sorted(adapters.items())]
    if not wanted:
        raise EvalError("--arms: with --env only base and adapters can be evaluated (no adapters given?)")
    results: list[HeldoutArm] = []
    for index, (arm, adapter) in enumerate(wanted):
        if progress:
            progress(arm, index, len(wanted))
        try:
            held = evaluate_adapter(env_id, config, adapter)
        except (FactoryError, OSError, ValueError, RuntimeError) as exc:  # this arm's model or adapter; the others go on
            results.append(HeldoutArm(arm=arm, adapter=adapter, error=" ".join(str(exc).split())[:300] or type(exc).__name__))
            continue
        results.append(HeldoutArm(arm=arm, adapter=adapter, **held.model_dump()))
    if progress:
        progress("done", len(wanted), len(wanted))
    base = next((a.mean for a in results if a.arm == ARM_BASE), None)
    for arm in results:
        if arm.arm != ARM_BASE and base is not None and arm.mean is not None:
            arm.delta = arm.mean - base
    out.mkdir(parents=True, exist_ok=True)
    report = HeldoutReport(
        env_id=env_id, model=str(config.model), gguf_file=config.gguf_file,
        seeds=next((a.seeds for a in results if a.seeds), heldout_seeds(config.heldout)),  # by variant: not consecutive
        samples=config.heldout.samples, temperature=config.heldout.temperature, compact_tools=config.rollout.compact_tools,
        max_new_tokens=config.rollout.max_new_tokens, settings_from=settings_from, arms=results, out=str(out),
    )
    report.chart = str(chart(report, out / "heldout.png"))
    write_atomic(out / "results.json", report.model_dump_json(indent=2) + "\n")  # last, whole or not at all
    return report


def columns() -> list[str]:
    return ["arm", "held-out reward [95%]", "success", "n", "cut turns", "Δ base"]


def rows(report: HeldoutReport) -> list[dict[str, str]]:
    out = []
    for arm in report.arms:
        mean = "—" if arm.mean is None else f"{arm.mean:.3f} [{arm.low:.2f}–{arm.high:.2f}]"
        success = "—" if arm.success_rate is None else f"{arm.success_rate:.0%}"
        n = "failed" if arm.error else f"{arm.valid}/{arm.episodes}" + (f" ({arm.errors} errors)" if arm.errors else "")
        delta = "" if arm.delta is None else f"{arm.delta:+.3f}"
        out.append({"arm": arm.arm, "held-out reward [95%]": mean, "success": success, "n": n, "cut turns": "" if arm.error else str(arm.cut_turns),
                    "Δ base": delta})
    return out


def title(report: HeldoutReport) -> str:
    first, last = report.seeds[0], report.seeds[-1]
    mode = "greedy" if report.temperature == 0 else f"temperature {report.temperature:g}"
    return f"{report.env_id}: held-out seeds {first}..{last} × {report.samples} ({mode})"


def chart(report: HeldoutReport, path: Path) -> Path:
    """One bar per arm with its 95% interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from factory.evaluate.charts import _bars

    fig, ax = plt.subplots(figsize=(max(4.5, 1.2 * len(report.arms) + 2), 3.8), dpi=110)
    arms = [a.arm for a in report.arms]
    _bars(ax, ["held-out reward"], arms, [[a.mean] for a in report.arms],
          [[[a.low, a.high] if a.low is not None and a.high is not None else None] for a in report.arms], "score")
    ax.set_title(title(report), fontsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
