"""``factory analyze``: find the capabilities an agent lacks, from its successful and failed trajectories."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from factory.analyze.errors import AnalyzeInputError
from factory.cli.common import fail
from factory.analyze.gold import GoldIndex, load_tasks
from factory.analyze.importers import load_trajectories
from factory.analyze.pipeline import AnalysisResult, AnalyzeConfig, analyze
from factory.analyze.report import write_outputs
from factory.llm.errors import LLMConfigError, LLMError


class _Exit(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _bad(message: str) -> _Exit:
    return _Exit(message, 2)


def _number(flag: str, text: str | None, kind: type, low: float | None = None, high: float | None = None):
    if text is None:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise _bad(f"{flag} {text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
        raise _bad(f"{flag} {text} is out of range: must be {bounds}")
    return value


def _summary(result: AnalysisResult, paths: dict[str, Path], console: Console) -> None:
    report = result.report
    table = Table(title=f"Capabilities ({report.labeler}; δ={report.delta:g}, ρ={report.coverage_threshold:g}, K={report.min_runs} of N={report.runs})")
    for column, justify in (("capability", "left"), ("ER+", "right"), ("ER−", "right"), ("Δ [95% CI]", "right"), ("coverage [95% CI]", "right"), ("runs", "right"), ("selected", "center")):
        table.add_column(column, justify=justify, no_wrap=column in ("capability", "Δ [95% CI]", "coverage [95% CI]"))  # type: ignore[arg-type]

    def fmt(value: float | None, ci=None) -> str:
        text = "—" if value is None else f"{value:.2f}"
        return text + (f" [{ci.low:.2f}, {ci.high:.2f}]" if ci is not None else "")

    for f in sorted(report.candidates, key=lambda f: (-f.stats.selected_runs, -f.stats.coverage, f.name)):
        s = f.stats
        table.add_row(
            f.name, fmt(s.er_success), fmt(s.er_failure), fmt(s.gap, s.gap_ci), fmt(s.coverage, s.coverage_ci),
            f"{s.selected_runs}/{s.total_runs}", "[green]yes[/]" if s.selected else "no",
        )  # fmt: skip
    console.print(table)
    console.print(
        f"{report.n_trajectories} trajectories ({report.n_successes} successes, {report.n_failures} failures); "
        f"{len(report.capabilities)} selected, explaining {report.failures_covered} of {report.n_failures} failures."
    )
    for note in report.notes:
        console.print(f"[yellow]note:[/] {note}")
    console.print(f"wrote {paths['capabilities']} and {paths['report']}")


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
    runs: Annotated[str, typer.Option("--runs", metavar="N", help="Independent labeling runs.")] = "10",
    delta: Annotated[str, typer.Option("--delta", metavar="FLOAT", help="Minimum contrast Δ = ER− − ER+ (δ).")] = "0.20",
    coverage: Annotated[str, typer.Option("--coverage", metavar="FLOAT", help="Minimum share of all failures lacking the capability (ρ).")] = "0.10",
    min_runs: Annotated[Optional[str], typer.Option("--min-runs", metavar="K", help="Runs that must select a capability (default: ceil(0.8 N), i.e. 8 of 10).")] = None,
    tasks: Annotated[Optional[list[Path]], typer.Option("--tasks", help="τ² tasks.json with gold actions, for the offline labeler (repeatable).")] = None,
    catalogue: Annotated[str, typer.Option("--catalogue", metavar="MODE", help="seed: built-in capabilities seed LLM discovery; only: no discovery; off: discovery alone.")] = "seed",
    batch_size: Annotated[str, typer.Option("--batch-size", metavar="N", help="Trajectories per labeling call.")] = "4",
    concurrency: Annotated[str, typer.Option("--concurrency", metavar="N", help="Labeling calls in flight at once.")] = "8",
    bootstrap: Annotated[str, typer.Option("--bootstrap", metavar="N", help="Bootstrap resamples for the intervals (0: none).")] = "1000",
    seed: Annotated[str, typer.Option("--seed", metavar="N", help="Seed for sampling, prompt order and the bootstrap.")] = "0",
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the LLM response cache.")] = False,
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("analysis"),
    json_output: Annotated[bool, typer.Option("--json", help="Print the machine-readable report only.")] = False,
) -> None:
    """Find the capabilities an agent lacks by contrasting its successful and failed trajectories (TRACE).

    Each candidate capability is labeled NA / PRESENT / LACKING on every trajectory, N times. A capability is kept when the lacking rate among failures exceeds that among successes by at least δ, and it is lacking in at least a share ρ of all failures, in at least K of the N runs. Writes capabilities.json (for `factory build --report`), report.md, charts and labels.jsonl under --out.

    Examples:

    factory analyze results.json --tasks ../shared/targets/tau2/airline/tasks.json

    factory analyze runs/*.json --llm openai:gpt-4.1 --runs 10 --out analysis/

    factory analyze traj.jsonl --llm vllm:Qwen/Qwen3-32B --llm-base-url http://127.0.0.1:8000/v1 --json
    """
    err = Console(stderr=True)
    try:
        result, paths = _run(
            trajectories, llm, llm_base_url, runs, delta, coverage, min_runs, tasks, catalogue,
            batch_size, concurrency, bootstrap, seed, no_cache, out, json_output, err,
        )  # fmt: skip
    except _Exit as exc:
        _fail(exc.args[0], exc.code)
    except (AnalyzeInputError, LLMConfigError) as exc:
        _fail(str(exc), 2)
    except LLMError as exc:
        _fail(f"LLM call failed: {exc}", 1)
    except OSError as exc:
        _fail(f"cannot write outputs: {exc}", 1)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Exception as exc:  # noqa: BLE001 - the CLI promises no traceback
        _fail(f"internal error: {type(exc).__name__}: {exc}", 1)
    if json_output:
        typer.echo(result.report.model_dump_json(indent=2))
    else:
        _summary(result, paths, Console())


def _fail(message: str, code: int) -> None:
    fail(" ".join(str(message).split()), code)


def _run(trajectories, llm, llm_base_url, runs, delta, coverage, min_runs, tasks, catalogue, batch_size, concurrency, bootstrap, seed, no_cache, out, json_output, err):
    if catalogue not in ("seed", "only", "off"):
        raise _bad(f"--catalogue {catalogue!r} is not one of: seed, only, off")
    n_runs = _number("--runs", runs, int, 1, 100)
    k = _number("--min-runs", min_runs, int, 1, 100)
    if k is not None and k > n_runs:
        raise _bad(f"--min-runs {k} exceeds --runs {n_runs}")
    config = AnalyzeConfig(
        runs=n_runs,
        delta=_number("--delta", delta, float, -1.0, 1.0),
        coverage=_number("--coverage", coverage, float, 0.0, 1.0),
        min_runs=k,
        catalogue=catalogue,  # type: ignore[arg-type]
        batch_size=_number("--batch-size", batch_size, int, 1, 50),
        concurrency=_number("--concurrency", concurrency, int, 1, 256),
        bootstrap=_number("--bootstrap", bootstrap, int, 0, 100_000),
        seed=_number("--seed", seed, int, 0),
    )
    client = None
    spec_text = llm if llm is not None else os.environ.get("TRACE_LLM")
    if spec_text and spec_text.strip().lower() != "offline":
        from factory.llm.spec import make_client, parse_llm_spec

        client = make_client(parse_llm_spec(spec_text, base_url=llm_base_url), cache=not no_cache)
    elif catalogue == "off":
        raise _bad("--catalogue off needs an LLM (--llm) for discovery; the offline labeler knows only the built-in catalogue")
    gold = load_tasks(list(tasks)) if tasks else GoldIndex()
    imported = load_trajectories(list(trajectories))
    if not json_output:
        for skipped in imported.skipped[:5]:
            err.print(f"[yellow]skipped[/] {skipped}", highlight=False)
        if len(imported.skipped) > 5:
            err.print(f"[yellow]skipped[/] {len(imported.skipped) - 5} more record(s)")

    sources = [str(p) for p in trajectories]
    if json_output or not err.is_terminal:  # no live display in pipes, logs or --json
        result = analyze(imported.trajectories, config, client=client, gold=gold, sources=sources)
    else:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=False) as bar:
            tasks_by_stage: dict[str, int] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if stage not in tasks_by_stage:
                    tasks_by_stage[stage] = bar.add_task(stage, total=total)
                bar.update(tasks_by_stage[stage], completed=done, total=total)

            result = analyze(imported.trajectories, config, client=client, gold=gold, sources=sources, progress=progress)
    paths = write_outputs(result, out)
    if "charts_skipped" in paths and not json_output:
        err.print("[yellow]note:[/] matplotlib is not installed, so no charts were drawn (pip install matplotlib)")
    return result, paths
