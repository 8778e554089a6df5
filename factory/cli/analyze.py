"""``factory analyze``: find the capabilities an agent lacks, from its successful and failed trajectories."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from factory.analyze.errors import AnalyzeInputError
from factory.analyze.importers import load_trajectories
from factory.analyze.pipeline import AnalysisResult, AnalyzeConfig, analyze
from factory.analyze.report import ci_text, fmt, method_line, ordered, write_outputs
from factory.analyze.tasks import TaskIndex, load_tasks
from factory.cli.common import emit_json, fail, interrupted, safe
from factory.cli.paths import PathProblem, preflight_folder
from factory.cli.progress import progress_display
from llm_clients.errors import LLMConfigError, LLMError
from schemas.files import reason

WIDE = 110
"""At this console width and above the summary keeps each interval on its figure's line; below, it stacks."""


class _Exit(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _bad(message: str) -> _Exit:
    return _Exit(message, 2)


def _number(flag: str, text: str | None, kind: type, low: float, high: float | None = None):
    """A flag's number: parsed, finite and within its range, else one line that gives the range."""
    if text is None:
        return None
    bounds = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
    try:
        value = kind(text)
    except ValueError:
        raise _bad(f"{flag} {text!r} is not {'an integer' if kind is int else 'a number'}; it must be {bounds}") from None
    if kind is float and not math.isfinite(value):
        raise _bad(f"{flag} {text!r} is not a finite number; it must be {bounds}")
    if value < low or (high is not None and value > high):
        raise _bad(f"{flag} {text} is out of range: it must be {bounds}")
    return value


def summary_table(result: AnalysisResult, width: int) -> Table:
    """The candidates at a glance. Every column stays at any width from 80: below ``WIDE`` columns the
    intervals go on a second line of their cell instead of being cut."""
    report = result.report
    stacked = width < WIDE
    table = Table(title=f"Capabilities (δ={report.delta:g}, ρ={report.coverage_threshold:g})", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("capability", overflow="fold", min_width=16)
    for header in ("ER+", "ER−"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("Δ [95% CI]" if not stacked else "Δ [CI]", justify="right", no_wrap=True)
    table.add_column("coverage [95% CI]" if not stacked else "cov. [CI]", justify="right", no_wrap=True)
    table.add_column("n S/F", justify="right", no_wrap=True)
    if not report.deterministic or report.resamples:
        table.add_column("resamples" if report.resamples else "runs", justify="right", no_wrap=True)
    table.add_column("sel.", justify="center", no_wrap=True)
    sep = "\n" if stacked else " "
    for f in ordered(report):
        s = f.stats
        cells = [
            safe(f.name) + (" *" if s.support_warning else ""),
            fmt(s.er_success),
            fmt(s.er_failure),
            fmt(s.gap) + (sep + ci_text(s.gap_ci, compact=True) if s.gap_ci else ""),
            fmt(s.coverage) + (sep + ci_text(s.coverage_ci, compact=True) if s.coverage_ci else ""),
            f"{s.n_success_labeled}/{s.n_failure_labeled}",
        ]
        if not report.deterministic or report.resamples:
            cells.append(f"{s.selected_runs}/{s.total_runs}")
        cells.append("[green]yes[/]" if s.selected else "no")
        table.add_row(*cells)
    return table


def _summary(result: AnalysisResult, paths: dict[str, Path], console: Console) -> None:
    report = result.report
    console.print(summary_table(result, console.width))
    if any(f.stats.support_warning for f in report.candidates):
        console.print("* fewer than 10 labeled successes or failures (n S/F): treat those figures as anecdotes", highlight=False)
    excluded = f", {report.n_unattributable} not attributable to the agent" if report.n_unattributable else ""
    console.print(
        f"{report.n_trajectories} trajectories: {report.n_successes} successes, {report.n_failures} failures counted{excluded}. "
        f"{len(report.capabilities)} selected, explaining {report.failures_covered} of {report.n_failures} counted failures.",
        highlight=False,
    )
    console.print(safe(method_line(report).replace("`", "")) + ".", highlight=False)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {safe(note)}", highlight=False)
    console.print(f"wrote {safe(paths['capabilities'])} and {safe(paths['report'])}", highlight=False)


def analyze_command(
    trajectories: Annotated[
        list[Path],
        typer.Argument(help="Trajectory files: τ²-bench results (JSON or results folder), τ-bench results JSON, or our JSONL.", show_default=False),
    ],
    llm: Annotated[
        Optional[str],
        typer.Option("--llm", help="Analysis LLM, e.g. openai:gpt-4.1, anthropic:claude-opus-4-5, vllm:MODEL; 'offline' (the default without $TRACE_LLM) uses the rule-based labeler."),
    ] = None,
    llm_base_url: Annotated[Optional[str], typer.Option("--llm-base-url", help="Base URL of an OpenAI-compatible server (or $TRACE_LLM_BASE_URL).")] = None,
    runs: Annotated[Optional[str], typer.Option("--runs", metavar="N", help="Independent LLM labeling runs, 1-100 (default 10). The offline labeler is deterministic and labels once; N > 1 makes K of N count N resamples of the tasks (default 1: no resampling).")] = None,
    delta: Annotated[str, typer.Option("--delta", metavar="FLOAT", help="Minimum contrast Δ = ER− − ER+ (δ), 0 to 1.")] = "0.20",
    coverage: Annotated[str, typer.Option("--coverage", metavar="FLOAT", help="Minimum share of counted failures lacking the capability (ρ), 0 to 1.")] = "0.10",
    min_runs: Annotated[Optional[str], typer.Option("--min-runs", metavar="K", help="Runs (or, offline, task resamples) that must select a capability (default: ceil(0.8 N), i.e. 8 of 10).")] = None,
    tasks: Annotated[Optional[list[Path]], typer.Option("--tasks", help="τ² tasks.json (repeatable): checks which task version each run used; it never replaces the tasks a results file embeds.")] = None,
    include_unattributable: Annotated[bool, typer.Option("--include-unattributable", help="Count failures that are not the agent's fault (revised task, user simulator, infrastructure, max steps) as failures.")] = False,
    labels: Annotated[Optional[Path], typer.Option("--labels", metavar="FILE", help="Hand labels (JSONL: id, outcome, cause, lacking) to score this run's labels against; the report states the agreement.")] = None,
    catalogue: Annotated[str, typer.Option("--catalogue", metavar="MODE", help="seed: built-in capabilities seed LLM discovery; only: no discovery; off: discovery alone.")] = "seed",
    batch_size: Annotated[str, typer.Option("--batch-size", metavar="N", help="Trajectories per labeling call, 1-50.")] = "4",
    concurrency: Annotated[str, typer.Option("--concurrency", metavar="N", help="Labeling calls in flight at once, 1-256.")] = "8",
    bootstrap: Annotated[str, typer.Option("--bootstrap", metavar="N", help="Bootstrap resamples for the intervals, 0-100000 (0: none).")] = "1000",
    seed: Annotated[str, typer.Option("--seed", metavar="N", help="Seed for sampling, prompt order and the bootstrap (≥ 0).")] = "0",
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the LLM response cache.")] = False,
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("analysis"),
    json_output: Annotated[bool, typer.Option("--json", help="Print the machine-readable report only.")] = False,
) -> None:
    """Find the capabilities an agent lacks by contrasting its successful and failed trajectories (TRACE).

    Each candidate capability is labeled NA / PRESENT / LACKING on every trajectory. A capability is kept when the lacking rate among failures exceeds that among successes by at least δ, and it is lacking in at least a share ρ of the failures (in at least K of N runs of an LLM labeler; offline, with --runs N, in at least K of N resamples of the tasks). Labels are weighed by their confidence. Failures that are not the agent's fault (a task the benchmark corrected since the run, a simulated user that ended or derailed the episode, an infrastructure error) are counted apart. Writes capabilities.json (for `factory build --report`), report.md (with each LACKING label's evidence: message, rule, values compared), charts, labels.jsonl and trajectories.jsonl under --out.

    Examples:

    factory analyze results.json

    factory analyze runs/*.json --tasks ../shared/targets/tau2/airline/tasks.json --include-unattributable

    factory analyze runs/*.json --runs 10 --min-runs 8

    factory analyze runs/*.json --llm openai:gpt-4.1 --runs 10 --out analysis/

    factory analyze traj.jsonl --llm vllm:Qwen/Qwen3-32B --llm-base-url http://127.0.0.1:8000/v1 --json
    """
    err = Console(stderr=True)
    try:
        options = dict(
            llm=llm, llm_base_url=llm_base_url, runs=runs, delta=delta, coverage=coverage, min_runs=min_runs, tasks=tasks,
            include_unattributable=include_unattributable, labels=labels, catalogue=catalogue, batch_size=batch_size, concurrency=concurrency,
            bootstrap=bootstrap, seed=seed, no_cache=no_cache, out=out, json_output=json_output,
        )  # fmt: skip
        result, paths = _run(trajectories, options, err)
    except _Exit as exc:
        _fail(exc.args[0], exc.code)
    except (AnalyzeInputError, LLMConfigError) as exc:
        _fail(str(exc), 2)
    except LLMError as exc:
        _fail(f"LLM call failed: {exc}", 1)
    except OSError as exc:
        _fail(f"cannot write outputs to {out}: {reason(exc)}; nothing in {out} was changed (outputs are written all "
              "or nothing); free some space or choose another --out", 1)
    except KeyboardInterrupt as exc:
        interrupted(f"; nothing in {out} was changed; run the command again", exc)
    except Exception as exc:  # noqa: BLE001 - the CLI promises no traceback
        _fail(f"internal error: {type(exc).__name__}: {exc}", 1)
    if json_output:
        emit_json(result.report)
    else:
        _summary(result, paths, Console())


def _fail(message: str, code: int) -> None:
    fail(" ".join(str(message).split()), code)


def _config(o: dict, llm: bool) -> AnalyzeConfig:
    if o["catalogue"] not in ("seed", "only", "off"):
        raise _bad(f"--catalogue {o['catalogue']!r} is not one of: seed, only, off")
    given = _number("--runs", o["runs"], int, 1, 100)
    k = _number("--min-runs", o["min_runs"], int, 1, 100)
    n_runs = given if given is not None else (10 if llm else 1)  # offline: N > 1 resamples the tasks, K of N of them must select
    if k is not None and k > n_runs:
        raise _bad(f"--min-runs {k} exceeds --runs {n_runs}; K must be between 1 and N")
    return AnalyzeConfig(
        runs=n_runs,
        delta=_number("--delta", o["delta"], float, 0.0, 1.0),
        coverage=_number("--coverage", o["coverage"], float, 0.0, 1.0),
        min_runs=k,
        catalogue=o["catalogue"],
        batch_size=_number("--batch-size", o["batch_size"], int, 1, 50),
        concurrency=_number("--concurrency", o["concurrency"], int, 1, 256),
        bootstrap=_number("--bootstrap", o["bootstrap"], int, 0, 100_000),
        seed=_number("--seed", o["seed"], int, 0, 2**32 - 1),
        include_unattributable=o["include_unattributable"],
        labels=o.get("labels"),
    )


def _run(trajectories: list[Path], o: dict, err: Console) -> tuple[AnalysisResult, dict[str, Path]]:
    spec_text = o["llm"] if o["llm"] is not None else os.environ.get("TRACE_LLM")
    use_llm = bool(spec_text and spec_text.strip().lower() != "offline")
    config = _config(o, use_llm)
    client = None
    if use_llm:
        from llm_clients.spec import make_client, parse_llm_spec

        client = make_client(parse_llm_spec(spec_text, base_url=o["llm_base_url"]), cache=not o["no_cache"])
    elif config.catalogue == "off":
        raise _bad("--catalogue off needs an LLM (--llm) for discovery; the offline labeler knows only the built-in catalogue")
    try:
        preflight_folder(o["out"], "output folder", "pass another --out")
    except PathProblem as exc:
        raise _bad(str(exc)) from None
    task_index = load_tasks(list(o["tasks"])) if o["tasks"] else TaskIndex()
    imported = load_trajectories(list(trajectories))
    if not imported.trajectories:
        files = ", ".join(str(p) for p in trajectories[:3]) + (f" and {len(trajectories) - 3} more" if len(trajectories) > 3 else "")
        skipped = f" ({len(imported.skipped)} record(s) skipped, e.g. {imported.skipped[0]})" if imported.skipped else ""
        raise _bad(f"no trajectories in {files}{skipped}; pass a trajectories.jsonl from `factory rollout` or a τ²/ToolSandbox results file")
    if not o["json_output"]:
        for skipped in imported.skipped[:5]:
            err.print(f"[yellow]skipped[/] {safe(skipped)}", highlight=False)
        if len(imported.skipped) > 5:
            err.print(f"[yellow]skipped[/] {len(imported.skipped) - 5} more record(s)")
    sources = [str(p) for p in trajectories]
    # a bar on a terminal, a line per stage step in a log (every 10 s at most), nothing on stdout
    with progress_display(err, SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()) as bar:
        stages: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in stages:
                stages[stage] = bar.add_task(f"analyze: {stage}", total=total)
            bar.update(stages[stage], completed=done, total=total)

        result = analyze(imported.trajectories, config, client=client, tasks=task_index, sources=sources, progress=progress)
    paths = write_outputs(result, o["out"], trajectories=imported.trajectories)
    if "charts_skipped" in paths and not o["json_output"]:
        err.print("[yellow]note:[/] matplotlib is not installed, so no charts were drawn (pip install matplotlib)")
    return result, paths
