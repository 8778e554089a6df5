"""``factory rollout``: run a policy on a real target (τ² airline/retail, any MCP server) and record trajectories."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import TextColumn
from rich.table import Table

from factory.cli.common import JsonOption, console, emit_json, errors, fail, interrupted, safe
from factory.cli.paths import PathProblem, preflight_folder
from factory.cli.progress import default_columns, progress_display
from schemas.errors import FactoryError, Interrupted, one_line, validation_message
from llm_clients import LLMConfigError
from schemas.files import reason

if TYPE_CHECKING:  # the engine imports env_registry, which must not load for `factory --help`
    from factory.rollout.summary import RolloutSummary


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_summary(summary: "RolloutSummary", out: Console) -> None:
    """A two-column table that fits 80 columns, then one line per note."""
    table = Table(title=safe(f"{summary.policy} on {summary.target}"), show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    kinds = ", ".join(f"{k}: {v}" for k, v in summary.error_kinds.items())
    rows = [
        ("tasks", str(summary.tasks)),
        ("trials per task", str(summary.trials)),
        ("episodes", f"{summary.episodes} ({summary.resumed} resumed)"),
        ("passed", str(summary.passed)),
        ("failed", str(summary.failed)),
        ("errors", f"{summary.errors} ({kinds})" if summary.errors else "0"),
        ("pass rate", _fmt(summary.pass_rate)),
        ("mean reward", _fmt(summary.mean_reward)),
    ]
    rows += [(f"pass^{k}", _fmt(v)) for k, v in summary.pass_hat_k.items() if summary.trials > 1]
    for metric, value in rows:
        table.add_row(metric, safe(value))
    out.print(table)
    if summary.not_fully_judged:
        parts = ", ".join(f"{p} in {n}" for p, n in summary.not_judged_parts.items())
        out.print(
            f"[yellow]note:[/] {summary.not_fully_judged} episode(s) were graded on part of their reward basis only; "
            f"not judged: {safe(parts)}. Pass --judge MODEL to judge NL assertions."
        )
    for reason, count in summary.skipped.items():
        out.print(f"[yellow]skipped:[/] {count} task(s) {safe(reason)}")
    if summary.gold_errors:
        out.print(f"[yellow]note:[/] gold actions that return errors themselves: tasks {safe(', '.join(summary.gold_errors))}")
    for example in summary.error_examples[:3]:
        out.print(f"[red]error:[/] task {safe(example.task_id)} trial {example.trial} ({example.kind}): {safe(example.message)}")
    if summary.interrupted:
        out.print("[yellow]interrupted:[/] run the same command again to resume; finished episodes are kept")
    if failed_run(summary):
        out.print(f"[bold red]every episode failed[/] ({summary.errors} errors, none graded): the run failed; see the errors above")
    out.print(f"wrote {safe(summary.out)}/trajectories.jsonl and summary.json")


def failed_run(summary: "RolloutSummary") -> bool:
    """Episodes were due and not one could be graded (a target that never started, a policy that always failed)."""
    return summary.episodes > 0 and summary.errors == summary.episodes


def _task_ids(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def rollout(
    target: Annotated[str, typer.Option("--target", help="tau2-airline, tau2-retail, mcp (any MCP server; needs --server and --tasks), or toolsandbox (Apple's ToolSandbox, when installed).")],
    policy: Annotated[str, typer.Option("--policy", help="scripted:gold, scripted:empty, an LLM (openai:gpt-4.1, anthropic:..., vllm:MODEL), or hf:PATH[@ADAPTER].")],
    out: Annotated[Path, typer.Option("--out", help="Output folder; an existing one is resumed.")] = Path("rollout"),
    tasks: Annotated[Optional[Path], typer.Option("--tasks", help="τ² tasks.json (default for τ² targets: the tasks bundled with the server package).")] = None,
    task_ids: Annotated[Optional[list[str]], typer.Option("--task-ids", help="Only these task ids (repeatable, or comma-separated).")] = None,
    server: Annotated[Optional[str], typer.Option("--server", help="MCP server: a stdio command line or an http(s):// URL (toolsandbox: the worker's command line).")] = None,
    backend: Annotated[str, typer.Option("--backend", help="auto (τ²-bench itself when importable, else MCP), mcp, or native.")] = "auto",
    user: Annotated[str, typer.Option("--user", help="Simulated user: scripted (deterministic) or an LLM spec.")] = "scripted",
    judge: Annotated[Optional[str], typer.Option("--judge", help="LLM that judges NL assertions; without it they are reported as not judged.")] = None,
    trials: Annotated[int, typer.Option("--trials", min=1, help="Episodes per task.")] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=256, help="Episodes in parallel (one target process each).")] = 4,
    max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="Agent turns before an episode is cut (max_steps).")] = 100,
    max_errors: Annotated[int, typer.Option("--max-errors", min=1, help="Tool errors before an episode ends (too_many_errors).")] = 10,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the per-episode seeds.")] = 0,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0, help="Sampling temperature of LLM/HF policies and LLM users.")] = 0.0,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", min=1, help="Tokens per policy turn (LLM default 2048, hf: 512).")] = None,
    call_timeout: Annotated[Optional[float], typer.Option("--call-timeout", min=0.1, help="Seconds a target may take per tool call (default 30).")] = None,
    reset: Annotated[Optional[str], typer.Option("--reset", help="MCP: how each episode gets a fresh world: tool, restart (stdio), none; default auto (tool if listed, else restart, else none).")] = None,
    reset_tool: Annotated[Optional[str], typer.Option("--reset-tool", help="MCP: the server's reset tool (default reset_state; hidden from the agent).")] = None,
    state_tool: Annotated[Optional[str], typer.Option("--state-tool", help="MCP: a tool returning the world's state as JSON; the task's DB check reads it.")] = None,
    allow_shared_state: Annotated[bool, typer.Option("--allow-shared-state", help="MCP: run more than one episode on a server that cannot be reset.")] = False,
    workdir: Annotated[Optional[Path], typer.Option("--workdir", help="MCP (stdio): the folder the server keeps its files in; it runs there and the folder is put back as it was before every episode.")] = None,
    inherit_env: Annotated[Optional[list[str]], typer.Option("--inherit-env", help="MCP (stdio): a variable the server takes from this environment (an API key, a config path); repeatable.")] = None,
    json_output: JsonOption = False,
) -> None:
    """Run a policy on a real target and record its trajectories for `factory analyze`.

    Every (task, trial) runs once: run the same command again after an interruption and only the missing
    episodes run. Writes trajectories.jsonl (schemas.Trajectory, one per line), run.json and summary.json
    under --out. Episodes whose target, user or policy failed are counted as errors, not failures; when every
    episode errored (a server that cannot start) the run failed: exit 1.

    Examples:

    factory rollout --target tau2-airline --policy scripted:gold --out runs/gold

    factory rollout --target tau2-retail --policy openai:gpt-4.1 --user openai:gpt-4.1 --judge openai:gpt-4.1 --trials 4 --out runs/retail

    factory rollout --target tau2-airline --task-ids 0,1,2 --policy hf:Qwen3-8B@adapters/dates --out runs/hf

    factory rollout --target mcp --server "my-mcp-server --stdio" --tasks tasks.json --policy vllm:Qwen/Qwen3-8B --json

    factory rollout --target toolsandbox --policy scripted:gold --out runs/toolsandbox-gold

    factory rollout --target mcp --server http://127.0.0.1:8000/mcp --state-tool dump_state --tasks tasks.json --policy scripted:gold

    factory rollout --target mcp --server "python notes_server.py" --workdir ./notes --inherit-env NOTES_KEY --tasks tasks.json --policy scripted:gold
    """
    from env_registry.targets.errors import TargetError
    from factory.rollout.engine import Rollout, RolloutConfig, check_names

    try:
        config = RolloutConfig(
            target=target, out=out, policy=policy, tasks_file=str(tasks) if tasks else None, task_ids=_task_ids(task_ids),
            server=server, backend=backend, user=user, judge=judge, trials=trials, concurrency=concurrency,
            max_steps=max_steps, max_errors=max_errors, seed=seed, temperature=temperature, max_tokens=max_tokens, call_timeout_s=call_timeout,
            reset=reset, reset_tool=reset_tool, state_tool=state_tool, allow_shared_state=allow_shared_state,
            workdir=str(workdir.resolve()) if workdir else None, inherit_env=_task_ids(inherit_env),
        )  # fmt: skip
    except ValidationError as exc:
        fail(validation_message(exc, RolloutConfig, where=lambda loc: f"--{str(loc[0]).replace('_', '-')}" if loc else ""))
    try:
        check_names(config)  # policy, user, judge: named wrongly, said so now, not as a missing API key later
        preflight_folder(out, "output folder", "pass another --out")
    except (FactoryError, PathProblem) as exc:
        fail(one_line(exc))
    stop = threading.Event()
    try:
        with progress_display(errors, *default_columns(TextColumn("passed {task.fields[passed]}"))) as bar:
            job = bar.add_task(f"{safe(target)} episodes", total=None, passed=0)

            def progress(done: int, total: int, passed: int) -> None:
                bar.update(job, completed=done, total=total, passed=passed)

            runner = Rollout(config, stop=stop, progress=progress)
            summary = runner.run()
    except (TargetError, FactoryError, LLMConfigError) as exc:
        fail(one_line(exc))
    except OSError as exc:
        fail(f"cannot write to {out}: {reason(exc)}", 1)
    except KeyboardInterrupt as exc:
        interrupted("; run the command again to resume (finished episodes are kept)", exc)
    if json_output:
        emit_json(summary)
    else:
        render_summary(summary, console)
    if summary.interrupted:  # what finished is in the file; say so on stderr too, where scripts look
        interrupted("; run the command again to resume (finished episodes are kept)", Interrupted((runner.stopped_by or 130) - 128))
    if failed_run(summary):
        raise typer.Exit(1)
