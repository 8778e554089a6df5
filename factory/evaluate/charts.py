"""Pass rates as a grouped bar chart: one group per domain and one for overall, one bar per arm."""

from __future__ import annotations

from pathlib import Path

from factory.evaluate.schema import EvalReport


def pass_rate_chart(report: EvalReport, path: Path, title: str = "τ² pass rate by arm") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [t.removeprefix("tau2-") for t in report.targets] + ["overall"]
    arms = report.arms
    width = 0.8 / max(1, len(arms))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(groups) + 0.5 * len(arms)), 4.2), dpi=110)
    for index, arm in enumerate(arms):
        values = [d.pass_rate for d in arm.domains] + [arm.pass_rate]
        xs = [g + (index - (len(arms) - 1) / 2) * width for g in range(len(groups))]
        bars = ax.bar(xs, [v or 0.0 for v in values], width, label=arm.arm)
        for bar, value in zip(bars, values):
            ax.annotate("n/a" if value is None else f"{value:.0%}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")  # fmt: skip
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("pass rate")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
