"""Write an analysis to disk: ``capabilities.json`` (the ``CapabilityReport`` for ``factory build``),
``report.md`` for people, PNG charts, every label (``labels.jsonl``) and every trajectory's attribution
(``trajectories.jsonl``) for auditing."""

from __future__ import annotations

import json
import os
from pathlib import Path

from factory.analyze.attribution import CAUSE_TEXT
from factory.analyze.charts import coverage_chart, selection_chart
from factory.analyze.offline import rule_documentation
from factory.analyze.pipeline import AnalysisResult
from factory.analyze.revisions import task_name
from schemas.capability import CapabilityReport, CapabilityStats


def fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _short(value: float) -> str:
    text = f"{value:.2f}"
    return text.replace("0.", ".", 1) if text.startswith(("0.", "-0.")) else text


def ci_text(ci, compact: bool = False) -> str:
    """`` [0.10, 0.40]``, or ``[.10,.40]`` where columns are tight."""
    if ci is None:
        return ""
    if compact:
        return f"[{_short(ci.low)},{_short(ci.high)}]"
    return f" [{ci.low:.2f}, {ci.high:.2f}]"


def counts(rate: float | None, labeled: int) -> str:
    """``k/n`` behind a rate (from the first run's figures for an LLM labeler's mean)."""
    return f"{round(rate * labeled)}/{labeled}" if rate is not None and labeled else f"0/{labeled}"


def ordered(report: CapabilityReport) -> list:
    return sorted(report.candidates, key=lambda f: (not f.stats.selected, -f.stats.selected_runs, -f.stats.coverage, f.name))


def method_line(report: CapabilityReport) -> str:
    if report.deterministic and report.resamples:
        runs = (f"deterministic, so it labeled once; selected in at least K = {report.min_runs} of N = {report.resamples} resamples of the "
                "tasks; labels weighed by their confidence")  # fmt: skip
    elif report.deterministic:
        runs = "deterministic, so it labeled once (no K-of-N: repeating it would only repeat its labels); labels weighed by their confidence"
    else:
        runs = f"selected in at least K = {report.min_runs} of N = {report.runs} labeling runs"
    unit = "tasks (clusters: a task's trials are not independent)" if report.bootstrap_unit == "task" else "trajectories"
    return f"labeler `{report.labeler}`, {runs}; 95% bootstrap intervals resample {unit}"


def _rates(s: CapabilityStats) -> tuple[str, str]:
    first = s.per_run[0] if s.per_run else None
    plus = counts(first.er_success, first.n_success_labeled) if first else "—"
    minus = counts(first.er_failure, first.n_failure_labeled) if first else "—"
    return f"{fmt(s.er_success)} ({plus})", f"{fmt(s.er_failure)} ({minus})"


def agreement_section(report: CapabilityReport) -> list[str]:
    """How far to trust the labels: the labeler's agreement with hand labels, measured or from --labels."""
    a = report.agreement
    if not a:
        return []
    rows = [(name, a.get(name)) for name in ("holdout", "all")] if a.get("source") == "measured" else [("this run", a.get("figures"))]
    where = (f"hand labels of {a['set'].get('trajectories')} real τ² trajectories ({', '.join(a['set'].get('agents', {}))}), "
             "`tests/analyze/real`" if a.get("source") == "measured" else f"`{a.get('source')}`")  # fmt: skip
    lines = ["", "## Labeler agreement", "", f"Labeler `{a.get('labeler')}` against {where}. Recall: agent-caused failures given at least "
             "one right LACKING label; precision: LACKING labels that are right; spared: failures that are not the agent's left "
             "unblamed; blamed: successes given a wrong LACKING label.", "",
             "| part | recall | precision | spared | blamed |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    for name, f in rows:
        if f:
            lines.append(f"| {name} | {f['recall']:.2f} ({f['found']}/{f['agent_failures']}) | {f['precision']:.2f} ({f['right_labels']}/{f['lacking_labels']}) "
                         f"| {f['spared']}/{f['other_failures']} | {f['blamed']}/{f['successes']} |")
    return lines


def markdown(result: AnalysisResult, charts: dict[str, str]) -> str:
    report = result.report
    unattributable = ", ".join(f"{n} {CAUSE_TEXT.get(c, c)}" for c, n in sorted(report.unattributable.items(), key=lambda kv: -kv[1]))
    lines = [
        "# Capability analysis",
        "",
        f"- trajectories: {report.n_trajectories} ({report.n_successes} successes, {report.n_failures} failures counted"
        + (f"; {report.n_unattributable} failures not attributable to the agent: {unattributable}" if report.n_unattributable else "")
        + f") on {', '.join(report.targets) or '—'}",
        f"- sources: {', '.join(report.sources) or '—'}",
        f"- {method_line(report)}; candidates from: {report.discovery}",
        f"- selection: Δ ≥ δ = {report.delta:g} and coverage ≥ ρ = {report.coverage_threshold:g}, compared as exact fractions",
        f"- selected: {len(report.capabilities)} capability(ies); counted failures explained by at least one: "
        f"{report.failures_covered} of {report.n_failures}",
    ]
    if report.llm_usage:
        u = report.llm_usage
        cost = "unknown" if u.get("cost_usd") is None else f"${u['cost_usd']:.4f}"
        lines.append(
            f"- LLM usage: {u.get('calls')} calls ({u.get('cached_calls')} from cache, {u.get('retries')} retries), "
            f"{u.get('input_tokens')} input / {u.get('output_tokens')} output tokens, cost {cost}"
        )
    lines += [f"- note: {note}" for note in report.notes]
    lines += agreement_section(report)
    runs_col = " resamples selected |" if report.resamples else "" if report.deterministic else " runs selected |"
    lines += [
        "",
        "## Candidates",
        "",
        "ER+ / ER− are lacking rates among successes / counted failures labeled PRESENT or LACKING (NA excluded), "
        "with the lacking/labeled counts behind them; coverage is the share of all counted failures labeled LACKING. "
        "Brackets are 95% bootstrap intervals.",
        "",
        f"| capability | ER+ | ER− | Δ | coverage |{runs_col} selected |",
        "|---|---:|---:|---:|---:|" + ("---:|" if runs_col else "") + ":---:|",
    ]
    for f in ordered(report):
        s = f.stats
        plus, minus = _rates(s)
        runs = f" {s.selected_runs}/{s.total_runs} |" if runs_col else ""
        lines.append(
            f"| `{f.name}` | {plus} | {minus} | {fmt(s.gap)}{ci_text(s.gap_ci)} | {fmt(s.coverage)}{ci_text(s.coverage_ci)} |{runs}"
            f" {'yes' if s.selected else 'no'} |"
        )
    warnings = [f"- `{f.name}`: {f.stats.support_warning}" for f in ordered(report) if f.stats.support_warning]
    if warnings:
        lines += ["", "Thin evidence:", ""] + warnings
    lines += ["", "## Selected capabilities", ""]
    if not report.capabilities:
        lines.append("None passed the thresholds.")
    for f in report.capabilities:
        lines += [f"### `{f.name}`", "", f.description, ""]
        if f.example_failure_ids:
            lines += ["Example failures: " + ", ".join(f"`{i}`" for i in f.example_failure_ids), ""]
    pairs = [o for o in report.overlap if o.both]
    lines += ["## Overlap on counted failures", ""]
    if pairs:
        lines += ["| a | b | both lacking | either lacking | Jaccard |", "|---|---|---:|---:|---:|"]
        lines += [f"| `{o.a}` | `{o.b}` | {o.both} | {o.either} | {o.jaccard:.2f} |" for o in sorted(pairs, key=lambda o: -o.jaccard)]
    else:
        lines.append("No counted failure lacks two capabilities at once (majority label over runs).")
    lines += _unattributable_section(result)
    lines += evidence_section(result)
    if charts:
        lines += ["", "## Charts", ""]
        for title, name in charts.items():
            lines += [f"![{title}]({name})", ""]
    if report.labeler == "offline":
        lines += [
            "",
            "## Offline labeler rules",
            "",
            "The offline labeler never sees the outcome or the gold actions: it judges the agent's calls and replies "
            "against the task's instructions and the domain policy, on the records the agent had read.",
            "",
        ]
        lines += [f"- **{name}**: {doc}" for name, doc in rule_documentation().items()]
    return "\n".join(lines).rstrip() + "\n"


EVIDENCE_ROWS = 25
"""LACKING labels shown per capability in report.md; labels.jsonl holds all of them."""


def _compared(values: dict) -> str:
    text = "; ".join(f"{k}={json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v}" for k, v in values.items())
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= 220 else text[:219] + "…"


def evidence_section(result: AnalysisResult) -> list[str]:
    """Every LACKING label's evidence (first run): where to look, the rule, the values compared, the confidence."""
    runs = result.labels[:1]
    lacking = [l for labels in runs for l in labels if l.label.value == "LACKING"]
    abstained = sum(1 for labels in runs for l in labels if l.abstained)
    if not lacking and not abstained:
        return []
    lines = ["", "## Evidence for LACKING labels", "",
             "Each row is one label: the trajectory, the message it rests on (index in the trajectory's messages), the rule and the "
             "values it compared, and the label's confidence (the selection weighs labels by it)."
             + (f" {abstained} label(s) abstained (NA: evidence too thin to decide); they are in labels.jsonl." if abstained else "")]  # fmt: skip
    order = [f.name for f in ordered(result.report)]
    for name in sorted({l.capability for l in lacking}, key=lambda n: order.index(n) if n in order else len(order)):
        mine = sorted((l for l in lacking if l.capability == name), key=lambda l: (-l.confidence, l.trajectory_id))
        lines += ["", f"### `{name}` ({len(mine)})", "", "| trajectory | message | rule | compared | confidence |", "|---|---:|---|---|---:|"]
        for label in mine[:EVIDENCE_ROWS]:
            ev = label.evidence[0] if label.evidence else None
            where = "—" if ev is None or ev.message_index is None else str(ev.message_index)
            lines.append(f"| `{label.trajectory_id}` | {where} | {ev.rule if ev else '—'} | {_compared(ev.compared) if ev else label.reason[:200]} "
                         f"| {label.confidence:.2f} |")  # fmt: skip
        if len(mine) > EVIDENCE_ROWS:
            lines.append(f"| … | | | {len(mine) - EVIDENCE_ROWS} more in labels.jsonl | |")
    return lines


def _unattributable_section(result: AnalysisResult) -> list[str]:
    rows = [(tid, a) for tid, a in result.attributions.items() if not a.attributable]
    if not rows:
        return []
    by_id = {tid: i for i, tid in enumerate(result.matrix.trajectory_ids)}
    rows = [(tid, a) for tid, a in rows if tid in by_id and not result.matrix.success[by_id[tid]]]
    lines = ["", "## Failures not attributable to the agent", "", "| trajectory | cause | detail |", "|---|---|---|"]
    for tid, a in sorted(rows)[:200]:
        lines.append(f"| `{tid}` | {CAUSE_TEXT.get(a.cause, a.cause)} | {a.detail.replace('|', '/')} |")
    if len(rows) > 200:
        lines.append(f"| … | {len(rows) - 200} more in trajectories.jsonl | |")
    return lines


OUTPUT_FILES = ("capabilities.json", "report.md", "labels.jsonl", "trajectories.jsonl", "coverage.png", "selection_frequency.png")
"""Every file an analysis writes; one it does not write this time (a stale chart) is removed with the rest."""


def write_outputs(result: AnalysisResult, out_dir: Path, *, charts: bool = True, trajectories=None) -> dict[str, Path]:
    """Write everything under ``out_dir``, all-or-nothing (:class:`factory.outputs.StagedOutputs`): a failure
    (a full disk) leaves the previous analysis as it was. Returns the final paths by role."""
    from factory.outputs import StagedOutputs

    out_dir = Path(out_dir)
    roles: dict[str, str] = {}
    chart_files: dict[str, str] = {}
    skipped = charts and not _have_matplotlib()
    charts = charts and not skipped
    with StagedOutputs(out_dir, last="capabilities.json") as staged:
        if charts:
            coverage_chart(result.report, staged.path("coverage.png"))
            roles["coverage_chart"] = "coverage.png"
            chart_files["Coverage and Δ with intervals"] = "coverage.png"
            if not result.report.deterministic:  # a deterministic labeler's stale chart from an LLM run would mislead
                selection_chart(result.report, staged.path("selection_frequency.png"))
                roles["selection_chart"] = "selection_frequency.png"
                chart_files["Selection frequency across runs"] = "selection_frequency.png"
        staged.write_text("report.md", markdown(result, chart_files))
        staged.write_text("labels.jsonl", "".join(
            json.dumps({"run": run, **label.model_dump(mode="json")}, ensure_ascii=False) + "\n"
            for run, labels in enumerate(result.labels) for label in labels
        ))  # fmt: skip
        staged.write_text("trajectories.jsonl", "".join(_trajectory_lines(result, trajectories or [])))
        staged.write_text("capabilities.json", result.report.model_dump_json(indent=2) + "\n")
        for name in ("report.md", "labels.jsonl", "trajectories.jsonl", "capabilities.json"):
            roles[name.split(".")[0]] = name
        _readable(staged.staging)
        moved = staged.commit(remove=OUTPUT_FILES)
    paths = {role: moved[name] for role, name in roles.items()}
    if skipped:
        paths["charts_skipped"] = out_dir
    return paths


def _readable(folder) -> None:  # noqa: ANN001
    """Outputs are ordinary files (mkstemp/mkdtemp make 0600/0700), readable as the umask allows."""
    umask = os.umask(0)
    os.umask(umask)
    for item in Path(folder).iterdir():
        os.chmod(item, 0o666 & ~umask)


def _trajectory_lines(result: AnalysisResult, trajectories) -> list[str]:
    out = []
    for t in trajectories:
        a = result.attributions.get(t.id)
        check = result.resolution.checks.get(t.id)
        out.append(json.dumps({
            "id": t.id, "source_file": t.metadata.get("source_file"), "record": t.metadata.get("record"),
            "task": task_name(t, check), "success": t.success, "reward": t.reward,
            "attributable": True if a is None else a.attributable, "cause": None if a is None else a.cause,
            "detail": None if a is None else a.detail, "task_version": None if check is None else check.status,
        }, ensure_ascii=False) + "\n")  # fmt: skip
    return out


def _have_matplotlib() -> bool:
    """Charts are optional: without matplotlib the report is still written."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True
