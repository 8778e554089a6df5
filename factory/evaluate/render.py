"""The comparison as rows of text: for the 80-column terminal table and for Markdown reports."""

from __future__ import annotations

from factory.evaluate.schema import ARM_BASE, TOOLSANDBOX_NOTE, EvalReport


def rate(passed: int, scored: int, value: float | None) -> str:
    return "—" if value is None else f"{value:.0%} {passed}/{scored}"


def columns(report: EvalReport) -> list[str]:
    return ["arm", *[t.removeprefix("tau2-") for t in report.targets], "overall", "Δ base"]


def rows(report: EvalReport) -> list[dict[str, str]]:
    """One row per arm: pass rate and counts per domain, overall (solved over the union), and the
    difference from the base arm in percentage points."""
    base = next((a.pass_rate for a in report.arms if a.arm == ARM_BASE), None)
    out = []
    for arm in report.arms:
        row = {"arm": arm.arm}
        for domain in arm.domains:
            row[domain.target.removeprefix("tau2-")] = rate(domain.passed, domain.passed + domain.failed, domain.pass_rate)
        row["overall"] = rate(arm.passed, arm.scored, arm.pass_rate)
        delta = None if base is None or arm.pass_rate is None or arm.arm == ARM_BASE else arm.pass_rate - base
        row["Δ base"] = "" if delta is None else f"{delta * 100:+.1f} pp"
        out.append(row)
    return out


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
    extra.append(f"{TOOLSANDBOX_NOTE}.")
    return "\n".join(lines) + "\n\n" + "\n\n".join(extra) + "\n"
