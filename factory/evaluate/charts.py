"""The comparison as grouped bar charts: τ² pass rate (one group per domain and one for overall, one bar per
arm) and, beside it when ToolSandbox was evaluated, its mean similarity and perfect rate with 95% intervals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factory.evaluate.schema import TOOLSANDBOX, EvalReport


def _bars(ax: Any, groups: list[str], arms: list[str], values: list[list[float | None]], errors: list[list[list[float] | None]] | None,
          label: str) -> None:  # fmt: skip
    """values[arm][group]; errors[arm][group] = [low, high] or None."""
    width = 0.8 / max(1, len(arms))
    for index, arm in enumerate(arms):
        xs = [g + (index - (len(arms) - 1) / 2) * width for g in range(len(groups))]
        heights = [v or 0.0 for v in values[index]]
        spans = (errors or [[None] * len(groups)] * len(arms))[index]
        yerr = [[max(0.0, h - s[0]) if s else 0.0 for h, s in zip(heights, spans)], [max(0.0, s[1] - h) if s else 0.0 for h, s in zip(heights, spans)]]
        bars = ax.bar(xs, heights, width, label=arm, yerr=yerr if errors else None, capsize=3 if errors else 0)
        for bar, value in zip(bars, values[index]):
            ax.annotate("n/a" if value is None else f"{value:.0%}" if label == "rate" else f"{value:.2f}",
                        (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=7,
                        xytext=(0, 2), textcoords="offset points")  # fmt: skip
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylim(0, 1.15)
    ax.grid(axis="y", alpha=0.3)


def pass_rate_chart(report: EvalReport, path: Path, title: str = "τ² pass rate by arm") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tau2 = [t for t in report.targets if t != TOOLSANDBOX]
    sandbox = TOOLSANDBOX in report.targets
    arms = [a.arm for a in report.arms]
    panels = int(bool(tau2)) + int(sandbox)
    fig, axes = plt.subplots(1, panels, figsize=(max(6.0, 1.6 * (len(tau2) + 1) + 0.5 * len(arms)) + 4.5 * int(sandbox and bool(tau2)), 4.2),
                             dpi=110, squeeze=False)  # fmt: skip
    left = 0
    if tau2:
        ax = axes[0][0]
        values = [[next(d.pass_rate for d in a.domains if d.target == t) for t in tau2] + [a.pass_rate] for a in report.arms]
        _bars(ax, [t.removeprefix("tau2-") for t in tau2] + ["overall"], arms, values, None, "rate")
        ax.set_ylabel("pass rate")
        ax.set_title(title)
        left = 1
    if sandbox:
        ax = axes[0][left]
        scores = [next(d for d in a.domains if d.target == TOOLSANDBOX) for a in report.arms]
        values = [[s.mean_similarity, s.pass_rate] for s in scores]
        errors = [[s.similarity_ci, s.perfect_ci] for s in scores]
        _bars(ax, ["mean similarity", "perfect rate"], arms, values, errors, "score")
        ax.set_title("ToolSandbox (95% intervals)")
    axes[0][panels - 1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
