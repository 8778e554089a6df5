"""What a run leaves for people and machines: metrics JSONL, a PNG reward curve, an 80-column summary."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from schemas.jsonl import jsonl_lines
from trainer.errors import TrainError

METRICS_FILE = "metrics.jsonl"
CURVE_FILE = "reward_curve.png"


class IterationMetrics(BaseModel):
    """One line of metrics.jsonl."""

    iteration: int
    phase: str = "grpo"
    reward_mean: float | None = Field(None, description="mean reward of the un-hinted rollouts with a valid reward")
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
        raise TrainError(f"cannot read {path} ({exc}); remove it to resume from the last checkpoint alone") from None
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(IterationMetrics.model_validate_json(line))
        except ValidationError as exc:
            if number == len(lines):  # the last row's write cut short by a kill: that iteration runs again
                continue
            first = str(exc).splitlines()[0]
            raise TrainError(f"{path} line {number} is not a metrics row ({first}); remove that line to resume") from None
    return rows


def rewrite_metrics(root: Path, rows: list[IterationMetrics]) -> None:
    text = "".join(row.model_dump_json() + "\n" for row in rows)
    (root / METRICS_FILE).write_text(text, encoding="utf-8")


def append_metrics(root: Path, row: IterationMetrics) -> None:
    with open(root / METRICS_FILE, "a", encoding="utf-8") as handle:
        handle.write(row.model_dump_json() + "\n")


def plot_curve(rows: list[IterationMetrics], path: Path, title: str) -> Path | None:
    """Reward mean (band: +- std) and success rate per iteration."""
    points = [r for r in rows if r.phase == "grpo" and r.reward_mean is not None]
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r.iteration for r in points]
    mean = [r.reward_mean for r in points]
    std = [r.reward_std or 0.0 for r in points]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.plot(x, mean, marker="o", markersize=3, label="reward mean")
    ax.fill_between(x, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)], alpha=0.2, label="± std")  # type: ignore[operator]
    ax.plot(x, [r.success_rate for r in points], linestyle="--", label="success rate")
    ax.set_xlabel("iteration")
    ax.set_ylabel("reward")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
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
        "seconds": round(seconds, 2),
        "s_per_iteration": round(seconds / len(grpo), 3) if grpo else None,
        "tokens_per_s": round(generated / generation, 1) if generation > 0 else None,
        "env_share": round(sum(r.env_s for r in grpo) / seconds, 3) if seconds > 0 else None,
    }


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
                          ("0-var", "right"), ("s/it", "right"), ("tok/s", "right"), ("status", "left")):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for result in results:
        s = result.get("summary") or {}
        table.add_row(
            result["env_id"].removeprefix("trace/"), fmt(s.get("iterations")), fmt(s.get("first_reward"), 2),
            fmt(s.get("last10_reward"), 2), fmt(s.get("zero_variance_share"), 2), fmt(s.get("s_per_iteration"), 1),
            fmt(s.get("tokens_per_s"), 0), "ok" if result.get("ok") else "failed",
        )
    return table


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
