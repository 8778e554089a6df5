"""``factory run --config pipeline.toml``: rollouts → analyze → build → train → route → eval, resumable."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from factory.cli.common import JsonOption, console, emit_json, errors, fail, interrupted, safe
from factory.cli.exits import exit_code
from schemas.errors import FactoryError, one_line
from schemas.files import reason

ORDER = ("rollouts", "analyze", "build", "train", "route", "eval")


def _stage_names(text: str | None, flag: str) -> list[str]:
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in ORDER]
    if unknown:
        fail(f"{flag} {unknown[0]!r} is not a stage; stages: {', '.join(ORDER)}")
    return names


def run_command(
    config: Annotated[Path, typer.Option("--config", "-c", help="The pipeline's TOML file (see examples/pipeline-cpu.toml).")],
    run_dir: Annotated[Optional[str], typer.Option("--run-dir", help="Run folder (overrides run_dir in the config).")] = None,
    until: Annotated[Optional[str], typer.Option("--until", help="Stop after this stage (e.g. train).")] = None,
    force: Annotated[Optional[str], typer.Option("--force", help="Run these stages again even if done (comma-separated).")] = None,
    show_plan: Annotated[bool, typer.Option("--plan", help="Show what would run and why, and run nothing.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Run TRACE end to end from one config: rollouts, analyze, build, train, route, eval, then a report.

    Every stage reads the previous stages' files under the run folder. Run the same command again and finished stages are skipped; a stage that was interrupted (Ctrl-C, kill, a crash) resumes where it stopped. Changing a section of the config runs that stage again, and the stages after it only if what it hands on changed. Ends with report/report.md and its PNGs: capability coverage, reward curves, pass rates before and after.

    Examples:

    factory run --config examples/pipeline-cpu.toml

    factory run --config examples/pipeline-gpu-vllm.toml --run-dir runs/qwen3-8b

    factory run -c pipeline.toml --plan

    factory run -c pipeline.toml --until train --json
    """
    from factory.pipeline.config import load_config

    stop_at = _stage_names(until, "--until")
    if len(stop_at) > 1:
        fail("--until takes one stage")
    forced = _stage_names(force, "--force")
    try:
        settings = load_config(config, run_dir)
    except FactoryError as exc:
        fail(str(exc))
    if show_plan:
        try:
            _plan(settings, forced, as_json)
        except FactoryError as exc:
            fail(str(exc), exit_code(exc))
        return
    _preflight(settings)
    result = _run(settings, str(config), stop_at[0] if stop_at else None, forced, as_json)
    if as_json:
        emit_json(result)
        return
    _summary(settings)
    if result.report:
        console.print(f"report: {safe(result.report)}", highlight=False)
    elif result.stopped_after:
        console.print(f"stopped after {safe(result.stopped_after)} (--until); run without --until to go on", highlight=False)


def _preflight(settings: Any) -> None:
    """What a typo in the config could get wrong, before any stage starts: the run folder, the base model, the
    rollout policy, user and judge (a stage that fails on a name minutes in has wasted the stages before it)."""
    from factory.cli.paths import PathProblem, preflight_folder
    from factory.preflight import check_judge, check_policy, check_user, model_problem

    try:
        preflight_folder(settings.run_path(), "run folder", "pass --run-dir DIR or set run_dir in the config")
        if settings.registry:
            preflight_folder(settings.registry_path(), "registry", "set registry in the config to a writable folder")
        if settings.rollouts.policy:
            check_policy(settings.rollouts.policy, "rollouts.policy")
        check_user(settings.rollouts.user, "rollouts.user")
        check_judge(settings.rollouts.judge, "rollouts.judge")
        check_user(settings.eval.user, "eval.user")
        check_judge(settings.eval.judge, "eval.judge")
    except (FactoryError, PathProblem) as exc:
        fail(str(exc))
    if not settings.is_tiny and (problem := model_problem(settings.model, "model =")):
        fail(problem)


def _summary(settings: Any) -> None:
    """The table a run ends with: every stage, what it did and what came out (read back from pipeline.json)."""
    from factory.cli.summary import summary_table
    from factory.pipeline.report import summary_rows
    from factory.pipeline.state import StateStore

    try:
        rows = summary_rows(StateStore(settings.run_path()).load())
    except FactoryError:
        return
    console.print(summary_table(f"factory run: {settings.run_dir}", ["stage", "status", "time", "result"], rows,
                                width=console.width, key="stage"))  # fmt: skip


def _plan(settings: Any, forced: list[str], as_json: bool) -> None:
    from factory.pipeline.runner import plan
    from factory.pipeline.stages import STAGES
    from factory.pipeline.state import StateStore

    state = StateStore(settings.run_path()).load()
    steps = plan(settings, state, STAGES, forced)
    if as_json:
        emit_json([s.model_dump() for s in steps])
        return
    from factory.cli.summary import summary_table

    rows = [{"stage": s.stage, "action": s.action, "why": s.why} for s in steps]
    console.print(summary_table(f"plan for {settings.run_dir}", ["stage", "action", "why"], rows, width=min(console.width, 80), key="stage"))


def _run(settings: Any, config_file: str, until: str | None, forced: list[str], as_json: bool) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from factory.cli.progress import progress_display

    from env_registry.targets.errors import TargetError
    from llm_clients import LLMConfigError
    from factory.pipeline.report import write_report
    from factory.pipeline.runner import Hooks, run_pipeline
    from factory.pipeline.stages import STAGES
    from sandbox import SandboxError

    stop = threading.Event()
    current: dict[str, str] = {}
    with progress_display(errors, TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          TimeRemainingColumn(), transient=True) as bar:  # fmt: skip
        bars: dict[str, Any] = {}

        def progress(label: str, done: int | None, total: int | None) -> None:
            if label not in bars:
                bars[label] = bar.add_task(safe(label), total=total)
            bar.update(bars[label], completed=done or 0, total=total)

        def say(text: str) -> None:  # on stderr, with --json too: stdout stays machine-readable
            errors.print(text, highlight=False, soft_wrap=True)

        def step(s: Any) -> None:
            current["stage"] = s.stage
            verb = {"run": "running", "resume": "resuming", "cached": "cached", "later": "waiting"}[s.action]
            say(f"[bold]{safe(s.stage)}[/]: {verb} ({safe(s.why)})")

        def done(o: Any) -> None:
            for label in [k for k in bars if k.startswith(o.stage)]:
                bar.remove_task(bars.pop(label))
            if o.action != "cached":
                say(f"[green]{safe(o.stage)}[/]: {o.action} in {o.seconds:.1f} s")

        hooks = Hooks(progress=progress, note=lambda text: say(f"[yellow]note:[/] {safe(text)}"), step=step, done=done)
        try:  # on a stop, the stage in progress stays marked running and resumes next time
            return run_pipeline(settings, STAGES, config_file=config_file, until=until, force=forced, hooks=hooks, stop=stop, report=write_report)
        except KeyboardInterrupt as exc:
            interrupted(f" during {current.get('stage', 'start-up')}; run the same command again to resume there", exc)
        except (FactoryError, TargetError, SandboxError, LLMConfigError) as exc:
            code = exit_code(exc)  # a bad setting found by a stage is still bad input (2); anything else: the run failed
            fail(f"{current.get('stage', 'pipeline')} failed: {one_line(exc)} (finished stages are kept; fix and run again)", code)
        except OSError as exc:
            fail(f"{current.get('stage', 'pipeline')} failed: cannot write {exc.filename or settings.run_dir}: {reason(exc)}", 1)
