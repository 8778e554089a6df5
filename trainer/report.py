"""What a run leaves for people and machines: metrics JSONL, a PNG reward curve, an 80-column summary."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from schemas.jsonl import jsonl_lines
from schemas.files import state_file_message, write_atomic
from trainer.errors import RunFileError

METRICS_FILE = "metrics.jsonl"
CURVE_FILE = "reward_curve.png"


class IterationMetrics(BaseModel):
    """One line of metrics.jsonl: a GRPO iteration (``phase`` grpo), a warm-start step (warm_start), or a
    held-out evaluation (heldout; ``iteration`` = GRPO updates done before it, so 0 is the starting point)."""

    iteration: int
    phase: str = "grpo"
    reward_mean: float | None = Field(None, description="mean reward of the un-hinted rollouts with a valid reward")
    valid_rollouts: int = Field(0, description="how many rollouts reward_mean is the mean of")
    reward_low: float | None = Field(None, description="held-out rows: 95% bootstrap interval of the mean (over seeds)")
    reward_high: float | None = None
    reward_std: float | None = None
    success_rate: float | None = None
    hinted_reward_mean: float | None = None
    groups: int = 0
    zero_variance_groups: int = 0
    zero_variance_share: float = 0.0
    rollouts: int = 0
    trained_rollouts: int = 0
    loss: float = 0.0
    clip_fraction: float = 0.0
    kl: float | None = None
    logprob_mean: float | None = None
    grad_norm: float | None = None
    cut_turns: int = Field(0, description="assistant turns cut at max_new_tokens")
    context_truncated: int = Field(0, description="episodes stopped at max_seq_len (kept out of the update)")
    infrastructure_errors: int = Field(0, description="episodes whose sandbox failed (kept out of the update)")
    first_error: str | None = Field(None, description="the first infrastructure error's message, if any")
    replayed: int = Field(0, description="episodes replayed on a fresh worker after theirs died")
    worker_failure: str | None = Field(None, description="the first sandbox worker failure of the iteration (replayed or not)")
    retries: int = Field(0, description="times this iteration was rolled out again for too few valid rollouts")
    incomplete: bool = Field(False, description="too few valid rollouts even after retries: not trained on")
    max_steps_episodes: int = 0
    mean_turns: float = 0.0
    generated_tokens: int = 0
    tokens_per_s: float = 0.0
    generation_s: float = 0.0
    env_s: float = 0.0
    update_s: float = 0.0
    seconds: float = 0.0
    env_share: float = 0.0


def read_metrics(root: Path) -> list[IterationMetrics]:
    path = root / METRICS_FILE
    if not path.exists():
        return []
    try:
        lines = jsonl_lines(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(state_file_message(path, exc, "remove it to resume from the last checkpoint alone")) from None
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(IterationMetrics.model_validate_json(line))
        except ValidationError as exc:
            if number == len(lines):  # the last row's write cut short by a kill: that iteration runs again
                continue
            raise RunFileError(state_file_message(path, exc, "remove that line to resume", line=number, model=IterationMetrics)) from None
    return rows


def rewrite_metrics(root: Path, rows: list[IterationMetrics]) -> None:
    """The kept rows of a resumed run, swapped in whole: a stop or a full disk mid-write loses no row."""
    write_atomic(root / METRICS_FILE, "".join(row.model_dump_json() + "\n" for row in rows))


def append_metrics(root: Path, row: IterationMetrics) -> None:
    with open(root / METRICS_FILE, "a", encoding="utf-8") as handle:
        handle.write(row.model_dump_json() + "\n")


def plot_curve(rows: list[IterationMetrics], path: Path, title: str) -> Path | None:
    """Training reward (band: +- std) and success rate per iteration, held-out reward with its 95% interval,
    and how many rollouts each mean stands on wherever that is not the full batch."""
    points = [r for r in rows if r.phase == "grpo" and r.reward_mean is not None]
    held = [r for r in rows if r.phase == "heldout" and r.reward_mean is not None]
    if not points and not held:
        return None
    try:  # optional: a run on a machine without it keeps its metrics and adapter, and says why there is no plot
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"note: {path.name} not drawn: matplotlib is not installed (pip install matplotlib); "
              f"the curve's figures are in {METRICS_FILE}", file=sys.stderr)
        return None

    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=110)
    if points:
        x = [r.iteration for r in points]
        mean = [float(r.reward_mean or 0.0) for r in points]
        std = [r.reward_std or 0.0 for r in points]
        full = max(r.rollouts for r in points)
        ax.plot(x, mean, marker="o", markersize=3, label=f"training reward (mean of {full} rollouts)")
        ax.fill_between(x, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)], alpha=0.15, label="± std")
        ax.plot(x, [r.success_rate for r in points], linestyle="--", linewidth=1, label="training success rate")
        for r in points:
            if r.valid_rollouts < r.rollouts:
                ax.annotate(f"n={r.valid_rollouts}", (r.iteration, r.reward_mean or 0.0), fontsize=6, color="crimson",
                            xytext=(0, 6), textcoords="offset points", ha="center")
        marked = [r for r in points if r.incomplete]
        if marked:
            ax.scatter([r.iteration for r in marked], [r.reward_mean for r in marked], marker="x", color="crimson",
                       zorder=3, label="too few valid rollouts (not trained on)")
    if held:
        hx = [r.iteration for r in held]
        hy = [float(r.reward_mean or 0.0) for r in held]
        low = [max(0.0, y - (r.reward_low if r.reward_low is not None else y)) for y, r in zip(hy, held)]
        high = [max(0.0, (r.reward_high if r.reward_high is not None else y) - y) for y, r in zip(hy, held)]
        n = max(r.valid_rollouts for r in held)
        ax.errorbar(hx, hy, yerr=[low, high], marker="s", markersize=4, capsize=3, color="black",
                    label=f"held-out reward, 95% interval (n={n} episodes)")
        for r in held:
            if r.valid_rollouts < n:
                ax.annotate(f"n={r.valid_rollouts}", (r.iteration, r.reward_mean or 0.0), fontsize=6, xytext=(0, -10),
                            textcoords="offset points", ha="center")
    ax.set_xlabel("GRPO iteration (held-out: after that many updates)")
    ax.set_ylabel("reward")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fig.savefig(temporary, format="png")
        os.replace(temporary, path)  # the previous curve or the new one, never half a PNG
    finally:
        plt.close(fig)
        temporary.unlink(missing_ok=True)
    return path


def tail_mean(rows: list[IterationMetrics], n: int = 10) -> float | None:
    values = [r.reward_mean for r in rows if r.phase == "grpo" and r.reward_mean is not None][-n:]
    return sum(values) / len(values) if values else None


def summary(rows: list[IterationMetrics]) -> dict[str, Any]:
    grpo = [r for r in rows if r.phase == "grpo"]
    seconds = sum(r.seconds for r in grpo)
    generated = sum(r.generated_tokens for r in grpo)
    generation = sum(r.generation_s for r in grpo)
    first = next((r.reward_mean for r in grpo if r.reward_mean is not None), None)
    held = [r for r in rows if r.phase == "heldout" and r.reward_mean is not None]
    return {
        "iterations": len(grpo),
        "first_reward": first,
        "last10_reward": tail_mean(rows, 10),
        "best_reward": max((r.reward_mean for r in grpo if r.reward_mean is not None), default=None),
        "zero_variance_share": _mean([r.zero_variance_share for r in grpo]),
        "trained_nothing_share": _mean([float(r.trained_rollouts == 0) for r in grpo]),  # every group flat or invalid
        "cut_turns": sum(r.cut_turns for r in grpo),
        "context_truncated": sum(r.context_truncated for r in grpo),
        "infrastructure_errors": sum(r.infrastructure_errors for r in grpo),
        "replayed": sum(r.replayed for r in grpo),
        "incomplete_iterations": sum(r.incomplete for r in grpo),
        "trained_nothing_share": round(sum(r.trained_rollouts == 0 for r in grpo) / len(grpo), 3) if grpo else None,
        "heldout_first": _held(held[0]) if held else None,
        "heldout_last": _held(held[-1]) if held else None,
        "heldout_best": _held(max(held, key=lambda r: r.reward_mean or 0.0)) if held else None,
        "seconds": round(seconds, 2),
        "s_per_iteration": round(seconds / len(grpo), 3) if grpo else None,
        "tokens_per_s": round(generated / generation, 1) if generation > 0 else None,
        "env_share": round(sum(r.env_s for r in grpo) / seconds, 3) if seconds > 0 else None,
    }


def _held(row: IterationMetrics) -> dict[str, Any]:
    return {"after_iterations": row.iteration, "reward": row.reward_mean, "low": row.reward_low, "high": row.reward_high,
            "success_rate": row.success_rate, "episodes": row.valid_rollouts}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def summary_table(results: list[dict[str, Any]]) -> Any:
    """One row per trained env; fits 80 columns."""
    from rich.table import Table

    table = Table(title="factory train", title_justify="left", expand=False, pad_edge=False)
    for name, justify in (("env", "left"), ("iters", "right"), ("first", "right"), ("last 10", "right"),
                          ("held-out", "right"), ("0-var", "right"), ("s/it", "right"), ("status", "left")):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for result in results:
        s = result.get("summary") or {}
        table.add_row(
            result["env_id"].removeprefix("trace/"), fmt(s.get("iterations")), fmt(s.get("first_reward"), 2),
            fmt(s.get("last10_reward"), 2), _held_cell(s), fmt(s.get("zero_variance_share"), 2),
            fmt(s.get("s_per_iteration"), 1), "ok" if result.get("ok") else "failed",
        )
    return table


def _held_cell(s: dict[str, Any]) -> str:
    """Held-out reward before GRPO -> after, e.g. "0.12→0.56"."""
    first, last = s.get("heldout_first") or {}, s.get("heldout_last") or {}
    if not last:
        return "-"
    return f"{fmt(first.get('reward'), 2)}→{fmt(last.get('reward'), 2)}"


def write_json(path: Path, data: Any) -> None:
    """Whole or not at all (``summary.json`` is a run's last write: a crash or a full disk leaves the previous one)."""
    write_atomic(path, json.dumps(data, indent=2, default=str) + "\n")
