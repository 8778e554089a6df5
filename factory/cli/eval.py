"""``factory eval``: the base model, each adapter alone, and the routed set on τ², side by side (or, with
``--env``, the base and each adapter on a registered env's held-out seeds: ``factory/cli/eval_env.py``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from pydantic import ValidationError

from factory.cli.common import JsonOption, RegistryOption, SandboxOption, check_backend, console, emit_json, errors, fail, interrupted, safe
from factory.cli.summary import summary_table
from schemas.errors import FactoryError, one_line, validation_message
from schemas.files import reason

if TYPE_CHECKING:
    from factory.evaluate.schema import EvalConfig, EvalReport


def split_task_ids(values: list[str] | None, targets: list[str]) -> dict[str, list[str] | None]:
    """``--task-ids 0,1`` (every target) or ``--task-ids tau2-retail:3,4`` (one target)."""
    chosen: dict[str, list[str] | None] = {t: None for t in targets}
    for value in values or []:
        target, sep, ids = value.partition(":")
        names = targets if not sep else [target]
        if sep and target not in targets:
            fail(f"--task-ids {value!r}: {target!r} is not one of the --target values ({', '.join(targets)})")
        parts = [p.strip() for p in (ids if sep else value).split(",") if p.strip()]
        for name in names:
            chosen[name] = (chosen[name] or []) + parts
    return chosen


def eval_command(
    target: Annotated[Optional[list[str]], typer.Option("--target", help="tau2-airline, tau2-retail and/or toolsandbox (repeat: the paper's τ² overall is over airline and retail; ToolSandbox is reported beside it).")] = None,
    env: Annotated[Optional[str], typer.Option("--env", help="Instead of --target: a registered env (NAME or trace/NAME-vN); the base and each adapter alone are evaluated on its held-out seeds, as `factory train` does.")] = None,
    heldout_seeds: Annotated[Optional[int], typer.Option("--heldout-seeds", min=1, help="With --env: how many held-out seeds (default: the adapter's training run's, else 16).")] = None,
    compact_tools: Annotated[Optional[bool], typer.Option("--compact-tools/--schema-tools", help="Tools as one signature line each, or as JSON schemas, for every arm (default: each adapter as it was trained, from its trained_prompt.json or run.json; the base arm: schemas with --target, the adapter's run's with --env). With --target, a warning names each adapter shown another rendering than it was trained on.")] = None,
    first_seed: Annotated[Optional[int], typer.Option("--first-seed", min=0, help="With --env: the first held-out seed (default: the training run's, else 2000000; never a seed the run trained on).")] = None,
    adapters_dir: Annotated[Optional[Path], typer.Option("--adapters", help="Folder with one adapter per capability, named after it: a PEFT adapter folder, or a `factory train` run folder.")] = None,
    adapter: Annotated[Optional[list[str]], typer.Option("--adapter", help="One adapter as CAPABILITY=PATH (repeatable).")] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="Base model folder or hub id (default: the adapters' base model).")] = None,
    arms: Annotated[str, typer.Option("--arms", help="Comma-separated: base, adapters (each alone), routed.")] = "base,adapters,routed",
    task_ids: Annotated[Optional[list[str]], typer.Option("--task-ids", help="Task ids: 0,1,2 for every target or tau2-retail:3,4 for one (repeatable).")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="Only the first N tasks of each target.")] = None,
    menu: Annotated[Optional[Path], typer.Option("--menu", help="Routing menu saved by `factory route --save-menu` (no sandbox needed).")] = None,
    capabilities: Annotated[Optional[Path], typer.Option("--capabilities", help="capabilities.json from `factory analyze`: menu descriptions and order.")] = None,
    debias: Annotated[bool, typer.Option("--debias", help="Route with cyclic label-order debiasing.")] = False,
    soft: Annotated[bool, typer.Option("--soft", help="Mix the most probable adapters (engine hf only).")] = False,
    engine: Annotated[str, typer.Option("--engine", help="hf: one local transformers model; server: an OpenAI-compatible server (vLLM) serving LoRA modules.")] = "hf",
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="With --engine server: the server's /v1 URL.")] = None,
    served_model: Annotated[Optional[str], typer.Option("--served-model", help="With --engine server: the base model's served name (default: --model).")] = None,
    load_adapters: Annotated[bool, typer.Option("--load-adapters", help="With --engine server: load each adapter into vLLM first (runtime LoRA API).")] = False,
    user: Annotated[str, typer.Option("--user", help="Simulated user: scripted or an LLM spec.")] = "scripted",
    judge: Annotated[Optional[str], typer.Option("--judge", help="LLM that judges NL assertions; without it they are reported as not judged.")] = None,
    trials: Annotated[int, typer.Option("--trials", min=1, help="Episodes per task (with --env: per held-out seed).")] = 1,
    max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="Agent turns before an episode is cut.")] = 100,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", min=1, help="Tokens per agent turn (hf default 512).")] = None,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0, help="Sampling temperature (0: greedy).")] = 0.0,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=256, help="Episodes in parallel (generation is shared).")] = 4,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the per-episode seeds.")] = 0,
    device: Annotated[str, typer.Option("--device", help="Torch device: cpu, cuda, cuda:1, mps.")] = "cpu",
    dtype: Annotated[str, typer.Option("--dtype", help="auto, float32, bfloat16 or float16.")] = "auto",
    out: Annotated[Path, typer.Option("--out", help="Output folder; an existing one with the same settings is resumed.")] = Path("eval"),
    fresh: Annotated[bool, typer.Option("--fresh", help="Discard earlier results in --out and start over.")] = False,
    registry: RegistryOption = None,
    sandbox: SandboxOption = "auto",
    as_json: JsonOption = False,
) -> None:
    """Evaluate the base model, each adapter alone and the routed set on τ² and ToolSandbox (TRACE's evaluation), or on a registered env's held-out seeds (--env).

    Every arm is a `factory rollout` run with the same tasks, user and seeds: its trajectories are kept under --out/arms/ARM/TARGET for `factory analyze`. One base model serves every arm; adapters are switched with PEFT, and the routed arm asks the router (frozen base model, adapters disabled) per task. Reports τ² pass rate per domain and overall (solved over the union of the domains' tasks, as in the paper) and, with --target toolsandbox (Apple's ToolSandbox installed), ToolSandbox's mean similarity and perfect scenarios with 95% intervals: a table, a PNG bar chart and results.json.

    With --env instead of --target: the base model and each adapter alone on the env's held-out seeds (seeds `factory train` never trains on), with the trainer's renderer and engine, greedy by default; an adapter from a `factory train` run is evaluated with that run's settings (run.json: base model, compact tools, tokens per turn, turn limit, held-out seeds and scenario variants). Reports the mean reward with a 95% interval, success rate and episode count per arm: a table, heldout.png and results.json.

    Examples:

    factory eval --target tau2-airline --target tau2-retail --adapters runs/ --capabilities analysis/capabilities.json

    factory eval --target tau2-airline --limit 5 --adapters adapters/ --menu menu.json --arms base,routed --json

    factory eval --target tau2-airline --target tau2-retail --target toolsandbox --adapters runs/ --menu menu.json

    factory eval --target tau2-retail --adapters adapters/ --menu menu.json --engine server --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-8B --load-adapters

    factory eval --env precondition_verification --heldout-seeds 16 --adapters runs/ --out eval-heldout
    """
    check_backend(sandbox)
    if env is not None:
        if target:
            fail("pass either --target (τ² / ToolSandbox tasks) or --env (a registered env's held-out seeds), not both")
        from factory.cli.eval_env import eval_env

        eval_env(locals())
        return
    if not target:
        fail("name what to evaluate: --target tau2-airline (τ² / ToolSandbox tasks) or --env NAME (a registered env's held-out seeds)")
    if heldout_seeds is not None or first_seed is not None:
        fail("--heldout-seeds and --first-seed go with --env (a registered env's held-out seeds), not with --target")
    wanted = [a.strip() for a in arms.split(",") if a.strip()]
    try:
        config = _config(locals(), wanted)
    except ValidationError as exc:
        fail(validation_message(exc))
    except FactoryError as exc:
        fail(one_line(exc))
    _preflight(config)
    _warn_prompts(config)
    report = _run(config, fresh, as_json)
    if as_json:
        emit_json(report)
    else:
        print_report(report)
    if failed_run(report):
        if not as_json:
            errors.print("[bold red]every episode of every arm errored[/] (none graded): the evaluation failed; see the notes above",
                         highlight=False)
        raise typer.Exit(1)


def failed_run(report: "EvalReport") -> bool:
    """Episodes ran and not one was graded in any arm (a target or a model that never worked)."""
    return bool(report.arms) and all(a.scored == 0 and a.errors > 0 for a in report.arms)


def _preflight(config: "EvalConfig") -> None:
    """The names a typo could get wrong, before a model loads or a target server starts: the simulated user,
    the judge, the base model (engine hf), the output folder."""
    from factory.cli.paths import PathProblem, preflight_folder
    from factory.preflight import check_judge, check_user, model_problem

    try:
        check_user(config.user)
        check_judge(config.judge)
        preflight_folder(Path(config.out), "--out folder", "pass another --out")
    except (FactoryError, PathProblem) as exc:
        fail(str(exc))
    if config.engine == "hf" and config.model and (problem := model_problem(config.model)):
        fail(problem)
    from schemas.files import adapter_problem

    for name, path in config.adapters.items():  # weights missing or cut short: said before a model loads
        if problem := adapter_problem(path, f"retrain {name} or pass another adapter"):
            fail(f"adapter {name}: {problem}")


def _warn_prompts(config: "EvalConfig") -> None:
    """One warning line per adapter that --compact-tools/--schema-tools shows another tool rendering than it was trained on."""
    from router.loading import AdapterPrompts

    try:
        lines = AdapterPrompts.read(config.adapters, config.compact_tools).warnings()
    except FactoryError as exc:
        fail(one_line(exc))
    for line in lines:
        errors.print(f"[yellow]warning:[/] {safe(line)}", highlight=False, soft_wrap=True)


def _config(args: dict[str, Any], wanted: list[str]) -> "EvalConfig":
    from factory.evaluate.schema import EvalConfig, EvalTarget
    from router.loading import adapters_given
    from router.schema import RouterConfig

    targets = list(dict.fromkeys(args["target"]))
    ids = split_task_ids(args["task_ids"], targets)
    return EvalConfig(
        targets=[EvalTarget(name=t, task_ids=ids[t], limit=args["limit"]) for t in targets],
        out=args["out"], arms=wanted, model=args["model"], adapters=adapters_given(args["adapters_dir"], args["adapter"]),
        menu=str(args["menu"]) if args["menu"] else None,
        capabilities=str(args["capabilities"]) if args["capabilities"] else None,
        registry=str(args["registry"]) if args["registry"] else None, sandbox=args["sandbox"],
        router=RouterConfig(debias="cyclic" if args["debias"] else "none", soft=args["soft"]), compact_tools=args["compact_tools"],
        engine=args["engine"], base_url=args["base_url"], served_model=args["served_model"], load_adapters=args["load_adapters"],
        device=args["device"], dtype=args["dtype"], user=args["user"], judge=args["judge"], trials=args["trials"],
        max_steps=args["max_steps"], max_tokens=args["max_tokens"], temperature=args["temperature"], seed=args["seed"],
        concurrency=args["concurrency"],
    )  # fmt: skip


def _run(config: "EvalConfig", fresh: bool, as_json: bool) -> "EvalReport":
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from env_registry.targets.errors import TargetError
    from factory.evaluate.runner import run_eval
    from llm_clients import LLMConfigError
    from sandbox import SandboxError

    from factory.cli.progress import progress_display

    stop = threading.Event()
    try:
        with progress_display(errors, TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TextColumn("passed {task.fields[passed]}"), TimeElapsedColumn(), TimeRemainingColumn()) as bar:  # fmt: skip
            jobs: dict[str, Any] = {}

            def progress(label: str, done: int, total: int, passed: int) -> None:
                if label not in jobs:
                    jobs[label] = bar.add_task(safe(label), total=total, passed=0)
                bar.update(jobs[label], completed=done, total=total, passed=passed)

            def menu_progress(name: str, done: int, total: int) -> None:
                progress("routing menu (demos in the sandbox)", done, total, 0)

            return run_eval(config, progress=progress, stop=stop, fresh=fresh, menu_progress=menu_progress)
    except SandboxError as exc:  # the sandbox that plays the routing menu's demos failed: the run failed
        fail(one_line(exc), 1)
    except (FactoryError, TargetError, LLMConfigError) as exc:
        fail(one_line(exc))
    except OSError as exc:
        fail(f"cannot write to {config.out}: {reason(exc)}", 1)
    except KeyboardInterrupt as exc:
        interrupted("; run the same command again to resume (finished episodes are kept)", exc)
    raise AssertionError("unreachable")


def print_report(report: "EvalReport") -> None:
    from factory.evaluate.render import columns, routes_line, rows, title
    from factory.evaluate.schema import TOOLSANDBOX, TOOLSANDBOX_NOTE

    console.print(summary_table(title(report), columns(report), rows(report), width=min(console.width, 80), key="arm"))
    line = routes_line(report)
    if line:
        console.print(safe(line), highlight=False)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {safe(note)}", highlight=False)
    if TOOLSANDBOX not in report.targets:
        console.print(f"[yellow]note:[/] {safe(TOOLSANDBOX_NOTE)}.", highlight=False)
    chart = f" and {report.chart}" if report.chart else ""
    console.print(f"wrote {safe(report.out)}/results.json{safe(chart)}; trajectories under {safe(report.out)}/arms/ (for `factory analyze`)", highlight=False)
