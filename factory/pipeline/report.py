"""The run's closing report: ``report/report.md`` with its PNGs - capability coverage (from the analysis),
reward curves (every adapter's GRPO run on one chart), pass rates before and after (base model, each
adapter, routed) - written from the stages' handoffs and files, so it can be written again at any time.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from factory.pipeline.config import PipelineConfig
from factory.pipeline.state import PipelineState

REPORT_DIR = "report"
NOT_MEANINGFUL = (
    "**These numbers are not meaningful.** The base model is `tiny`: a randomly initialised model of a few hundred "
    "thousand parameters built offline (trainer.tiny_model), trained for a handful of iterations on a few tasks. "
    "This run shows that every stage runs for real and hands its output to the next; it measures nothing about agents."
)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _num(value: Any, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def reward_curves(state: PipelineState, run_dir: Path, path: Path) -> Path | None:
    """Mean GRPO reward per iteration for every trained capability, on one chart."""
    train = state.stages.get("train")
    if train is None or train.handoff is None:
        return None
    series = {}
    for name, item in train.handoff.info.items():
        metrics = run_dir / item.get("metrics", "")
        if not metrics.is_file():
            continue
        from trainer.report import read_metrics

        rows = read_metrics(metrics.parent)  # the trainer's own reader: a torn last row is dropped, not a crash
        points = [(r.iteration, r.reward_mean) for r in rows if r.phase == "grpo" and r.reward_mean is not None]
        if points:
            series[name] = points
    if not series:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    for name, points in series.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, label=name)
    ax.set_xlabel("GRPO iteration")
    ax.set_ylabel("mean reward (synthetic env)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("Reward curves")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _copy(source: Path | None, target: Path) -> Path | None:
    if source is None or not source.is_file():
        return None
    shutil.copyfile(source, target)
    return target


def _stages(state: PipelineState) -> list[str]:
    lines = ["| stage | status | attempts | seconds | last action |", "|---|---|---:|---:|---|"]
    last = {event.stage: event for event in state.history}
    for name, record in state.stages.items():
        event = last.get(name)
        action = f"{event.action} ({event.why})" if event else ""
        lines.append(f"| {name} | {record.status} | {record.attempts} | {record.seconds:.1f} | {action} |")
    return lines


def write_report(config: PipelineConfig, state: PipelineState) -> str:
    run_dir = config.run_path()
    out = run_dir / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    info = {name: (r.handoff.info if r.handoff else {}) for name, r in state.stages.items()}
    lines = [f"# TRACE pipeline report: `{run_dir}`", ""]
    if config.is_tiny:
        lines += [f"> {NOT_MEANINGFUL}", ""]
    lines += [f"> {note}" for note in config.notes] + ([""] if config.notes else [])
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines += [f"Config `{state.config_file or '?'}`, base model `{config.model}`, targets "
              f"{', '.join(t.name for t in config.targets)}; written {stamp}.", "", "## Stages", "", *_stages(state), ""]  # fmt: skip
    lines += _rollouts(info.get("rollouts", {}))
    lines += _analysis(info.get("analyze", {}), run_dir, out)
    lines += _build(info.get("build", {}))
    lines += _training(info.get("train", {}), state, run_dir, out)
    lines += _routing(info.get("route", {}), run_dir, out)
    lines += _evaluation(info.get("eval", {}), run_dir, out)
    path = out / "report.md"
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return str(path)


def _rollouts(info: dict[str, Any]) -> list[str]:
    lines = ["## 1. Rollouts (before training)", "", f"Policy `{info.get('policy', '?')}`.", "",
             "| target | tasks | episodes | passed | errors | pass rate |", "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for target, s in info.get("summaries", {}).items():
        lines.append(f"| {target} | {s['tasks']} | {s['episodes']} | {s['passed']} | {s['errors']} | {_pct(s['pass_rate'])} |")
    return lines + [""]


def _analysis(info: dict[str, Any], run_dir: Path, out: Path) -> list[str]:
    lines = ["## 2. Capabilities the agent lacks", ""]
    if not info:
        return lines + ["Not run yet.", ""]
    lines.append(f"{info['n_trajectories']} trajectories ({info['n_successes']} successes, {info['n_failures']} counted failures), "
                 f"labeler `{info['labeler']}`.")  # fmt: skip
    if info["selected"]:
        lines += ["", "| capability | coverage | Δ |", "|---|---:|---:|"]
        lines += [f"| {s['name']} | {_num(s['coverage'])} | {_num(s['gap'])} |" for s in info["selected"]]
    if info["source"] == "fallback":
        lines += ["", "**The analysis selected no capability**, so the config's `analyze.fallback` list was built instead."]
    chart = _copy(run_dir / info["coverage_chart"] if info.get("coverage_chart") else None, out / "coverage.png")
    if chart:
        lines += ["", "![capability coverage](coverage.png)"]
    return lines + [""]


def _build(info: dict[str, Any]) -> list[str]:
    lines = ["## 3. Environments", "", f"Generator: `{info.get('generator', '?')}`.", ""]
    if info.get("gate"):
        lines += ["Gate settings reduced from the defaults: " + ", ".join(f"{k} {v}" for k, v in info["gate"].items()) + ".", ""]
    lines += ["| capability | env | gate |", "|---|---|---|"]
    for name, result in info.get("results", {}).items():
        status = result["validation"] if result["registered"] else f"{result['validation']}: {result.get('error') or ''}"
        lines.append(f"| {name} | {result.get('gym_id') or '—'} | {status} |")
    return lines + [""]


def _training(info: dict[str, Any], state: PipelineState, run_dir: Path, out: Path) -> list[str]:
    lines = ["## 4. Training (GRPO, one LoRA adapter per capability)", "",
             "| capability | iterations | first reward | last-10 reward | best |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    for name, item in info.items():
        s = item.get("summary", {})
        lines.append(f"| {name} | {_num(s.get('iterations'))} | {_num(s.get('first_reward'))} | {_num(s.get('last10_reward'))} | {_num(s.get('best_reward'))} |")
    if reward_curves(state, run_dir, out / "reward_curves.png"):
        lines += ["", "![reward curves](reward_curves.png)"]
    return lines + [""]


def _routing(info: dict[str, Any], run_dir: Path, out: Path) -> list[str]:
    lines = ["## 5. Routing", ""]
    if not info:
        return lines + ["Not run yet.", ""]
    routes = ", ".join(f"{k} {v}" for k, v in sorted(info.get("routes", {}).items(), key=lambda kv: -kv[1]))
    lines.append(f"On the {info.get('tasks', 0)} rollout tasks the router chose: {routes}.")
    accuracy = info.get("accuracy")
    if accuracy:
        if accuracy.get("n_evaluated"):
            lines.append(f"Accuracy against the capabilities found lacking: {accuracy['correct']}/{accuracy['n_evaluated']} "
                         f"({_pct(accuracy['accuracy'])}; always choosing the most common one: {_pct(accuracy['majority_baseline'])}).")  # fmt: skip
            if _copy(run_dir / accuracy["chart"] if accuracy.get("chart") else None, out / "confusion.png"):
                lines += ["", "![routing confusion](confusion.png)"]
        else:
            lines.append(f"Routing accuracy: not measured ({accuracy.get('note')}).")
    return lines + [""]


def _evaluation(info: dict[str, Any], run_dir: Path, out: Path) -> list[str]:
    from factory.evaluate.render import markdown
    from factory.evaluate.schema import EvalReport

    lines = ["## 6. Pass rates before (base) and after (adapters, routed)", ""]
    if not info.get("report"):
        return lines + ["Not run yet.", ""]
    report = EvalReport.model_validate(info["report"])
    lines += [markdown(report)]
    if _copy(run_dir / "eval" / "pass_rates.png", out / "pass_rates.png"):
        lines += ["![pass rates](pass_rates.png)"]
    lines += ["", f"Trajectories of every arm: `{Path(report.out)}/arms/` (readable by `factory analyze`)."]
    return lines + [""]


def summary_rows(state: PipelineState) -> list[dict[str, str]]:
    """One row per stage for the table ``factory run`` ends with: what it did, how long it took, what came out."""
    rows = []
    for name, record in state.stages.items():
        info = record.handoff.info if record.handoff else {}
        result = record.error or "" if record.status != "done" else _result(name, info)
        rows.append({"stage": name, "status": record.status, "time": f"{record.seconds:.1f} s", "result": result})
    return rows


def _result(stage: str, info: dict[str, Any]) -> str:
    try:
        if stage == "rollouts":
            s = list(info.get("summaries", {}).values())
            episodes, passed, errors = (sum(x[k] for x in s) for k in ("episodes", "passed", "errors"))
            return f"{episodes} episodes, {passed} passed, {errors} errors"
        if stage == "analyze":
            names = ", ".join(x["name"] for x in info.get("selected", [])) or "none"
            return f"{info.get('n_trajectories', 0)} trajectories; selected: {names}" + (" (built the fallback)" if info.get("source") == "fallback" else "")
        if stage == "build":
            results = info.get("results", {})
            return f"{sum(1 for r in results.values() if r.get('registered'))}/{len(results)} envs registered"
        if stage == "train":
            return "; ".join(f"{n}: last-10 reward {_num(i.get('summary', {}).get('last10_reward'))}" for n, i in info.items()) or "no adapter"
        if stage == "route":
            accuracy = info.get("accuracy") or {}
            routed = f"{info.get('tasks', 0)} tasks routed"
            return routed + (f", accuracy {_pct(accuracy.get('accuracy'))}" if accuracy.get("n_evaluated") else "")
        if stage == "eval":
            arms = (info.get("report") or {}).get("arms", [])
            return ", ".join(f"{a['arm']} {_pct(a.get('pass_rate'))}" for a in arms) or "-"
    except (KeyError, TypeError, ValueError):  # a handoff of an older run: the table still prints
        return "-"
    return ""
