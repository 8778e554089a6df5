"""Write an analysis to disk: ``capabilities.json`` (the ``CapabilityReport`` for ``factory build``),
``report.md`` for people, PNG charts, and every label (``labels.jsonl``) for auditing."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from factory.analyze.charts import coverage_chart, selection_chart
from factory.analyze.offline import rule_documentation
from factory.analyze.pipeline import AnalysisResult
from schemas.capability import CapabilityReport


def _fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _ci(ci) -> str:
    return "" if ci is None else f" [{ci.low:.2f}, {ci.high:.2f}]"


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; outputs are ordinary files
    os.replace(tmp, path)


def markdown(report: CapabilityReport, charts: dict[str, str]) -> str:
    lines = [
        "# Capability analysis",
        "",
        f"- trajectories: {report.n_trajectories} ({report.n_successes} successes, {report.n_failures} failures)"
        f" on {', '.join(report.targets) or '—'}",
        f"- sources: {', '.join(report.sources) or '—'}",
        f"- labeler: `{report.labeler}`; candidates from: {report.discovery}",
        f"- selection: Δ ≥ δ = {report.delta:g} and coverage ≥ ρ = {report.coverage_threshold:g}, in at least "
        f"K = {report.min_runs} of N = {report.runs} run(s)",
        f"- selected: {len(report.capabilities)} capability(ies); failures explained by at least one: "
        f"{report.failures_covered} of {report.n_failures}",
    ]
    if report.llm_usage:
        u = report.llm_usage
        cost = "unknown" if u.get("cost_usd") is None else f"${u['cost_usd']:.4f}"
        lines.append(
            f"- LLM usage: {u.get('calls')} calls ({u.get('cached_calls')} from cache, {u.get('retries')} retries), "
            f"{u.get('input_tokens')} input / {u.get('output_tokens')} output tokens, cost {cost}"
        )
    for note in report.notes:
        lines.append(f"- note: {note}")
    lines += [
        "",
        "## Candidates",
        "",
        "ER+ / ER− are lacking rates among successes / failures labeled PRESENT or LACKING (NA excluded); "
        "coverage is the share of all failures labeled LACKING. Figures are means over runs; brackets are 95% "
        "bootstrap intervals.",
        "",
        "| capability | ER+ | ER− | Δ | coverage | runs selected | selected |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for f in sorted(report.candidates, key=lambda f: (-f.stats.selected_runs, -f.stats.coverage, f.name)):
        s = f.stats
        lines.append(
            f"| `{f.name}` | {_fmt(s.er_success)} | {_fmt(s.er_failure)} | {_fmt(s.gap)}{_ci(s.gap_ci)} | "
            f"{_fmt(s.coverage)}{_ci(s.coverage_ci)} | {s.selected_runs}/{s.total_runs} | {'yes' if s.selected else 'no'} |"
        )
    lines += ["", "## Selected capabilities", ""]
    if not report.capabilities:
        lines.append("None passed the thresholds.")
    for f in report.capabilities:
        lines += [f"### `{f.name}`", "", f.description, ""]
        if f.example_failure_ids:
            lines.append("Example failures: " + ", ".join(f"`{i}`" for i in f.example_failure_ids))
            lines.append("")
    pairs = [o for o in report.overlap if o.both]
    lines += ["## Overlap on failed trajectories", ""]
    if pairs:
        lines += ["| a | b | both lacking | either lacking | Jaccard |", "|---|---|---:|---:|---:|"]
        for o in sorted(pairs, key=lambda o: -o.jaccard):
            lines.append(f"| `{o.a}` | `{o.b}` | {o.both} | {o.either} | {o.jaccard:.2f} |")
    else:
        lines.append("No failed trajectory lacks two capabilities at once (majority label over runs).")
    if charts:
        lines += ["", "## Charts", ""]
        for title, name in charts.items():
            lines += [f"![{title}]({name})", ""]
    if report.labeler == "offline":
        lines += [
            "",
            "## Offline labeler rules",
            "",
            "The offline labeler compares the agent's tool calls with the task's gold actions and the tools' "
            "read/write types; only state-changing gold actions are compared argument by argument.",
            "",
        ]
        for name, doc in rule_documentation().items():
            lines.append(f"- **`{name}`**: {doc}")
    return "\n".join(lines).rstrip() + "\n"


def write_outputs(result: AnalysisResult, out_dir: Path, *, charts: bool = True) -> dict[str, Path]:
    """Write everything under ``out_dir``; returns the paths by role."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    chart_files: dict[str, str] = {}
    if charts and not _have_matplotlib():
        charts = False
        paths["charts_skipped"] = out_dir
    if charts:
        paths["selection_chart"] = selection_chart(result.report, out_dir / "selection_frequency.png")
        paths["coverage_chart"] = coverage_chart(result.report, out_dir / "coverage.png")
        chart_files = {"Selection frequency across runs": "selection_frequency.png", "Coverage and Δ with intervals": "coverage.png"}
    paths["capabilities"] = out_dir / "capabilities.json"
    _atomic_write(paths["capabilities"], result.report.model_dump_json(indent=2) + "\n")
    paths["report"] = out_dir / "report.md"
    _atomic_write(paths["report"], markdown(result.report, chart_files))
    paths["labels"] = out_dir / "labels.jsonl"
    with paths["labels"].open("w", encoding="utf-8") as handle:
        for run, labels in enumerate(result.labels if not _same_runs(result) else result.labels[:1]):
            for label in labels:
                handle.write(json.dumps({"run": run, **label.model_dump(mode="json")}) + "\n")
    return paths


def _have_matplotlib() -> bool:
    """Charts are optional: the core install does not pull matplotlib."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _same_runs(result: AnalysisResult) -> bool:
    """The offline labeler reuses one list for every run; write it once."""
    return len(result.labels) > 1 and all(run is result.labels[0] for run in result.labels)
