"""PNG charts of an analysis (matplotlib, Agg backend, so it works headless): coverage and Δ with bootstrap
intervals against their thresholds, in the manner of the TRACE paper's Figure 2, and, for a labeler that
varies between runs (an LLM), how often each candidate was selected. A deterministic labeler gets no
selection-frequency chart: every run would select the same. A chart with nothing to plot says why."""

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


def empty_reason(report: CapabilityReport) -> str | None:
    """Why a chart of this report would have nothing to show, or None."""
    if not report.candidates:
        return "No candidate capabilities were labeled."
    if report.n_failures == 0:
        extra = f" ({report.n_unattributable} failures were not attributable to the agent)" if report.n_unattributable else ""
        return f"No failures attributable to the agent{extra}: coverage and ER− are undefined."
    if all(f.stats.gap is None and f.stats.coverage == 0 and not (f.stats.n_success_labeled or f.stats.n_failure_labeled)
           for f in report.candidates):  # labels that say PRESENT are labels too: only no label at all is "every NA"
        return "Every label is NA: no candidate capability was judged on these trajectories."
    return None


def _explain(plt, path: Path, title: str, reason: str) -> Path:
    fig, ax = plt.subplots(figsize=(8, 2.4))
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.5, reason, ha="center", va="center", wrap=True, fontsize=11)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _label(f: CapabilityFinding) -> str:
    return f"{f.name} (n={f.stats.n_success_labeled}/{f.stats.n_failure_labeled})" + (" *" if f.stats.support_warning else "")


def selection_chart(report: CapabilityReport, path: Path) -> Path:
    plt = _pyplot()
    title = f"Selection frequency over {report.runs} run(s) (δ = {report.delta:g}, ρ = {report.coverage_threshold:g})"
    reason = empty_reason(report)
    if reason:
        return _explain(plt, path, title, reason)
    findings = _ordered(report)
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(findings) + 1.8))
    values = [f.stats.selected_runs / max(1, f.stats.total_runs) for f in findings]
    ax.barh([_label(f) for f in findings], values, color=[SELECTED if f.stats.selected else REJECTED for f in findings])
    ax.axvline(report.min_runs / report.runs, color="black", linestyle="--", linewidth=1, label=f"K/N = {report.min_runs}/{report.runs}")
    ax.set_xlim(0, 1.05)
    ax.set_xlabel("share of labeling runs that selected the capability")
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def coverage_chart(report: CapabilityReport, path: Path) -> Path:
    plt = _pyplot()
    reason = empty_reason(report)
    if reason:
        return _explain(plt, path, "Coverage and Δ", reason)
    findings = _ordered(report)
    names = [_label(f) for f in findings]
    fig, (ax_cov, ax_gap) = plt.subplots(1, 2, figsize=(13, 0.45 * len(findings) + 2.2), sharey=True)
    for ax, attr, ci_attr, threshold, label in (
        (ax_cov, "coverage", "coverage_ci", report.coverage_threshold, "coverage (share of counted failures lacking it)"),
        (ax_gap, "gap", "gap_ci", report.delta, "Δ = ER− − ER+  (no bar: undefined)"),
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
    unit = "tasks" if report.bootstrap_unit == "task" else "trajectories"
    ax_cov.set_title(f"Coverage, 95% bootstrap over {unit}")
    ax_gap.set_title("Contrast Δ, 95% bootstrap")
    fig.text(0.01, 0.01, "n = labeled successes/failures; * fewer than 10 of either", fontsize=8)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
