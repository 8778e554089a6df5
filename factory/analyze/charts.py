"""PNG charts of an analysis (matplotlib, Agg backend, so it works headless): how often each candidate was
selected across runs, and coverage and Δ with bootstrap intervals against their thresholds, in the manner
of the TRACE paper's Figure 2."""

from __future__ import annotations

from pathlib import Path

from schemas.capability import CapabilityFinding, CapabilityReport

SELECTED, REJECTED = "#1f77b4", "#b0b0b0"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _ordered(report: CapabilityReport) -> list[CapabilityFinding]:
    return sorted(report.candidates, key=lambda f: (f.stats.selected_runs, f.stats.coverage, f.name))


def selection_chart(report: CapabilityReport, path: Path) -> Path:
    plt = _pyplot()
    findings = _ordered(report)
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(findings) + 1.6))
    names = [f.name for f in findings]
    values = [f.stats.selected_runs / max(1, f.stats.total_runs) for f in findings]
    ax.barh(names, values, color=[SELECTED if f.stats.selected else REJECTED for f in findings])
    ax.axvline(report.min_runs / report.runs, color="black", linestyle="--", linewidth=1, label=f"K/N = {report.min_runs}/{report.runs}")
    ax.set_xlim(0, 1.05)
    ax.set_xlabel("share of labeling runs that selected the capability")
    ax.set_title(f"Selection frequency over {report.runs} run(s) (δ = {report.delta:g}, ρ = {report.coverage_threshold:g})")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def coverage_chart(report: CapabilityReport, path: Path) -> Path:
    plt = _pyplot()
    findings = _ordered(report)
    names = [f.name for f in findings]
    fig, (ax_cov, ax_gap) = plt.subplots(1, 2, figsize=(12, 0.45 * len(findings) + 1.8), sharey=True)
    for ax, attr, ci_attr, threshold, label in (
        (ax_cov, "coverage", "coverage_ci", report.coverage_threshold, "coverage (share of all failures lacking it)"),
        (ax_gap, "gap", "gap_ci", report.delta, "Δ = ER− − ER+"),
    ):
        values, low, high = [], [], []
        for f in findings:
            value = getattr(f.stats, attr)
            value = 0.0 if value is None else value
            ci = getattr(f.stats, ci_attr)
            values.append(value)
            low.append(max(0.0, value - ci.low) if ci else 0.0)
            high.append(max(0.0, ci.high - value) if ci else 0.0)
        colors = [SELECTED if f.stats.selected else REJECTED for f in findings]
        ax.barh(names, values, xerr=[low, high], color=colors, capsize=3, error_kw={"elinewidth": 1})
        ax.axvline(threshold, color="black", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
        ax.set_xlabel(label)
        ax.legend(loc="lower right")
    ax_cov.set_title("Coverage with 95% bootstrap interval")
    ax_gap.set_title("Contrast Δ with 95% bootstrap interval")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
