"""The comparison as rows of text: for the 80-column terminal table and for Markdown reports."""

from __future__ import annotations

from factory.evaluate.schema import ARM_BASE, TOOLSANDBOX, TOOLSANDBOX_NOTE, DomainScore, EvalReport


def rate(passed: int, scored: int, value: float | None) -> str:
    return "—" if value is None else f"{value:.0%} {passed}/{scored}"


def tau2_targets(report: EvalReport) -> list[str]:
    return [t for t in report.targets if t != TOOLSANDBOX]


def columns(report: EvalReport) -> list[str]:
    tau2 = [t.removeprefix("tau2-") for t in tau2_targets(report)]
    out = ["arm", *tau2, *(["overall", "Δ base"] if tau2 else [])]
    return out + (["similarity", "perfect", "Δ sim"] if TOOLSANDBOX in report.targets else [])


def similarity_cell(domain: DomainScore) -> str:
    if domain.mean_similarity is None:
        return "—"
    ci = domain.similarity_ci
    return f"{domain.mean_similarity:.3f}" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else "")


def perfect_cell(domain: DomainScore) -> str:
    scored = domain.passed + domain.failed
    if not scored:
        return "—"
    ci = domain.perfect_ci
    return f"{domain.passed}/{scored}" + (f" [{ci[0]:.0%}–{ci[1]:.0%}]" if ci else "")


def rows(report: EvalReport) -> list[dict[str, str]]:
    """One row per arm: pass rate and counts per domain, overall (solved over the union), and the
    difference from the base arm in percentage points."""
    base = next((a.pass_rate for a in report.arms if a.arm == ARM_BASE), None)
    base_sim = next((d.mean_similarity for a in report.arms if a.arm == ARM_BASE for d in a.domains if d.target == TOOLSANDBOX), None)
    out = []
    for arm in report.arms:
        row = {"arm": arm.arm}
        for domain in arm.domains:
            if domain.target == TOOLSANDBOX:
                row["similarity"], row["perfect"] = similarity_cell(domain), perfect_cell(domain)
                delta = None if base_sim is None or domain.mean_similarity is None or arm.arm == ARM_BASE else domain.mean_similarity - base_sim
                row["Δ sim"] = "" if delta is None else f"{delta:+.3f}"
            else:
                row[domain.target.removeprefix("tau2-")] = rate(domain.passed, domain.passed + domain.failed, domain.pass_rate)
        if tau2_targets(report):
            row["overall"] = rate(arm.passed, arm.scored, arm.pass_rate)
            delta = None if base is None or arm.pass_rate is None or arm.arm == ARM_BASE else arm.pass_rate - base
            row["Δ base"] = "" if delta is None else f"{delta * 100:+.1f} pp"
        out.append(row)
    return out


def title(report: EvalReport) -> str:
    parts = (["τ² pass rate (passed/scored)"] if tau2_targets(report) else []) + (
        ["ToolSandbox similarity and perfect scenarios (95% intervals)"] if TOOLSANDBOX in report.targets else [])
    return "; ".join(parts)


def routes_line(report: EvalReport) -> str | None:
    routed = next((a for a in report.arms if a.kind == "routed"), None)
    if routed is None or not routed.routes:
        return None
    return "routed: " + ", ".join(f"{option} {count}" for option, count in sorted(routed.routes.items(), key=lambda kv: -kv[1]))


def markdown(report: EvalReport) -> str:
    cols = columns(report)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" if c == "arm" else "---:" for c in cols) + "|"]
    for row in rows(report):
        lines.append("| " + " | ".join(row.get(c, "") for c in cols) + " |")
    extra = [line for line in (routes_line(report),) if line]
    extra += [f"Note: {note}." for note in report.notes]
    if TOOLSANDBOX not in report.targets:
        extra.append(f"{TOOLSANDBOX_NOTE}.")
    return "\n".join(lines) + "\n\n" + "\n\n".join(extra) + "\n"
