"""``factory train``: GRPO-train one LoRA adapter per capability on registered envs (or collect rollouts)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from factory.cli.common import JsonOption, RegistryOption, check_backend, console, emit_json, errors, fail, parse_env_ref, safe, use_registry
from factory.cli.exits import exit_code, mark_reported
from schemas.errors import FactoryError, one_line
from schemas.files import reason

ConfigOption = Annotated[Optional[Path], typer.Option("--config", help="train.toml (see trainer/config.py for every key).")]


def _env_ids(env: Optional[str], train_all: bool, registry: Optional[Path]) -> list[str]:
    from env_registry.registry import Registry, RegistryError

    store = Registry(registry)
    if train_all:
        if env:
            fail("pass either ENV_ID or --all, not both")
        ids = []
        for name in store.capabilities():
            try:
                ids.append(store.get(name).manifest.gym_id)
            except RegistryError as exc:  # one broken entry never stops the others
                errors.print(f"skipped {safe(name)}: {safe(one_line(exc))}", highlight=False)
        if not ids:
            fail(f"no envs registered in {store.root}; build some with `factory build`")
        return ids
    if not env:
        fail("name the env to train on (e.g. precondition_verification or trace/precondition_verification-v0) or pass --all")
    name, version = parse_env_ref(env, None)
    try:
        return [store.get(name, version).manifest.gym_id]
    except RegistryError as exc:
        fail(str(exc))
        raise


def _progress(quiet: bool) -> Any:
    """A bar on a terminal; in a log, one line per iteration with the time left (iterations take seconds to minutes)."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from factory.cli.progress import progress_display

    return progress_display(
        errors, TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(), TimeElapsedColumn(),
        TimeRemainingColumn(), TextColumn("{task.fields[status]}"), enabled=not quiet, interval=0.0,
    )


def train(
    env: Annotated[Optional[str], typer.Argument(help="Registered env: NAME, trace/NAME-vN.")] = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Base model: local folder or hub id (with --base-url: the served model's name).")] = None,
    config: ConfigOption = None,
    overrides: Annotated[Optional[list[str]], typer.Option("--set", help="Override a config key, e.g. --set grpo.lr=2e-5 (repeatable).")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Run folder (default: runs/<capability>); with --all one sub-folder per env.")] = None,
    iterations: Annotated[Optional[int], typer.Option("--iterations", min=1, help="GRPO iterations (grpo.iterations).")] = None,
    groups: Annotated[Optional[int], typer.Option("--groups", min=1, help="Seeds per iteration, G (grpo.groups; default by model size). Fewer: shorter iterations.")] = None,
    group_size: Annotated[Optional[int], typer.Option("--group-size", min=2, help="Rollouts per seed, K (grpo.group_size; default by model size).")] = None,
    gguf_file: Annotated[Optional[str], typer.Option("--gguf-file", help="GGUF weights file inside --model.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --output from its last checkpoint (exit 2 if there is none: never a silent restart).")] = False,
    train_all: Annotated[bool, typer.Option("--all", help="Train one adapter per registered capability.")] = False,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="OpenAI-compatible endpoint serving --model: collect rollouts with it, no training.")] = None,
    collect_only: Annotated[Optional[Path], typer.Option("--collect-only", help="Write rollouts of the --base-url policy here (JSONL trajectories); no training.")] = None,
    registry: RegistryOption = None,
    sandbox: Annotated[Optional[str], typer.Option("--sandbox", help="Sandbox backend for env code (default: $TRACE_FACTORY_SANDBOX or auto).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Train a LoRA adapter with multi-turn GRPO on a registered env.

    Writes, under the run folder: adapter/ (PEFT format, for PeftModel.from_pretrained or vLLM
    --lora-modules), metrics.jsonl, reward_curve.png, checkpoints/, summary.json. A checkpoint follows every
    iteration on small runs; SIGTERM or Ctrl-C stops at the next safe point, checkpoints, and says how to
    resume (--resume).

    Defaults by model size: the learning rate, warm start, group sizes and sampling temperature that learnt on the
    blueprints are chosen from the base model's parameter count for every one of those keys not set: under 50M
    (tiny) grpo.lr 3e-4, 4x8 groups, temperature 0.7, a 400-step warm start at 3e-3 with 30% reference
    episodes; under 1B (e.g. SmolLM2-135M) grpo.lr 3e-5, 2x6 groups, temperature 1.0, a 40-step warm start at
    4e-4 with 50% reference episodes; from 1B up (or a hub id) the fields' own defaults. A key given in --config,
    --set or a flag always wins; a warm start you configure (any warm_start key) is taken whole.

    Examples:

    factory train precondition_verification --model ./tiny-model --iterations 2 --groups 1 --group-size 2

    factory train trace/precondition_verification-v0 --model ./my-model --iterations 40

    factory train precondition_verification --model Qwen/Qwen3-8B --config train.toml --set grpo.lr=2e-5

    factory train --all --model Qwen/Qwen3-8B --output runs/ --json

    factory train precondition_verification --model Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1 --collect-only rollouts.jsonl

    accelerate launch --num_processes 4 -m factory.cli train precondition_verification --model Qwen/Qwen3-8B
    """
    from trainer.config import load_config

    if sandbox:
        check_backend(sandbox)
    use_registry(registry)
    if (base_url is None) != (collect_only is None):
        fail("--base-url and --collect-only go together: the endpoint's rollouts are collected, not trained on")
    env_ids = _env_ids(env, train_all, registry)
    try:
        settings = load_config(config, overrides, model=model, gguf_file=gguf_file, sandbox=sandbox,
                               **{"grpo.iterations": iterations, "grpo.groups": groups, "grpo.group_size": group_size})
    except FactoryError as exc:
        fail(str(exc))
        return
    if collect_only is not None:
        _collect(env_ids, settings, base_url or "", collect_only, as_json)
        return
    if not settings.model:
        fail("no base model: pass --model PATH (a local folder or a hub id) or set model in --config")
    settings, chosen = _size_defaults(settings)
    main = os.environ.get("RANK", "0") == "0"  # under `accelerate launch` only rank 0 talks
    base = output or (Path(settings.output_dir) if settings.output_dir else None)
    runs = []
    for env_id in env_ids:
        capability = env_id.removeprefix("trace/").rsplit("-v", 1)[0]
        folder = base / capability if base and train_all else base or Path("runs") / capability
        runs.append((env_id, settings.model_copy(update={"output_dir": str(folder)})))
    locks: list[tuple[Path, Any]] = []
    try:
        resumes = _preflight(runs, resume, main, locks)
        if chosen and main:  # said once every input is known good: bad input stays one line
            errors.print(chosen, highlight=False, soft_wrap=True)
        results = []
        for (env_id, run_settings), resumed in zip(runs, resumes):
            results.append(_train_one(env_id, run_settings, resumed, not main))  # progress on stderr, --json or not
            if results[-1].get("stopped"):
                break  # a stop ends the whole command; the envs after it were not started
    finally:
        from trainer.checkpoint import unlock_run

        for folder, lock in locks:
            unlock_run(folder, lock)
    if main:
        _report(results, as_json)
    stopped = next((r for r in results if r.get("stopped")), None)
    if stopped is not None:
        mark_reported()
        raise typer.Exit(stopped["exit_code"])
    if not all(r["ok"] for r in results):
        raise typer.Exit(2 if all(r.get("exit_code") == 2 for r in results if not r["ok"]) else 1)


def _size_defaults(settings: Any) -> tuple[Any, str | None]:
    """The learning rate, warm start and group sizes that worked for a model of this size, for every one of those
    keys not set (trainer.config.SIZE_DEFAULTS), and the line that says which were chosen (None: none)."""
    from trainer.config import model_parameters, size_class, with_size_defaults

    parameters = model_parameters(settings.model, settings.gguf_file)
    resolved, chosen = with_size_defaults(settings, parameters)
    if not chosen or parameters is None:
        return resolved, None
    picked = ", ".join(f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}" for key, value in chosen.items())
    return resolved, (f"defaults for a {parameters / 1e6:.1f}M-parameter model ({size_class(parameters)[0]}): {picked} "
                      "(--set KEY=VALUE to choose otherwise)")


def _preflight(runs: list[tuple[str, Any]], resume: bool, main: bool, locks: list[tuple[Path, Any]]) -> list[bool]:
    """Everything a typo could get wrong, before a sandbox starts or a model loads: the model (its name, its
    config.json), every run folder (writable; held by no other `factory train`; holding a run exactly when
    --resume says so). A folder whose run stopped before its first checkpoint is started over, said on stderr;
    a resumed run says from which iteration. Returns, per run, whether it resumes."""
    from factory.cli.paths import PathProblem, preflight_folder
    from factory.preflight import model_problem
    import shutil

    from trainer.checkpoint import load_state, lock_run, resume_point, unlock_run

    import importlib.util

    missing = [name for name in ("torch", "transformers", "peft", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:  # one line, not an import traceback deep in the trainer (or accelerate's own, under `accelerate launch`)
        fail(f"factory train needs {', '.join(missing)} in this Python ({sys.executable}): pip install 'trace-factory[train]'")
    settings = runs[0][1]
    if problem := model_problem(settings.model):
        fail(problem)
    say = (lambda line: errors.print(f"[yellow]note:[/] {safe(line)}", highlight=False, soft_wrap=True)) if main else None
    resumes = []
    for env_id, run_settings in runs:
        folder = Path(run_settings.output_dir)
        created = not folder.exists()
        if created and resume:  # said before the lock makes the folder
            fail(f"cannot resume: {folder} does not exist; run the same command without --resume to start a run there")
        try:
            preflight_folder(folder, "run folder", "pass --output DIR")
            if main:  # under `accelerate launch` the ranks share the folder: rank 0 holds it
                locks.append((folder, lock_run(folder)))
            found = resume_point(folder, env_id, run_settings, resume, clear=main, note=say)
        except (PathProblem, FactoryError) as exc:
            if created and locks and locks[-1][0] == folder:  # refused: leave no folder the lock made
                unlock_run(*locks.pop())
                shutil.rmtree(folder, ignore_errors=True)
            fail(str(exc))
        except OSError as exc:
            from schemas.files import explain

            fail(f"cannot use run folder {folder}: {explain(exc, 'pass --output DIR')}")
        if found is not None and say is not None:
            say(f"{env_id}: resuming the run in {folder} from iteration {int(load_state(found)['iteration']) + 1} (checkpoint {found.name})")
        resumes.append(found is not None)
    return resumes


def _train_one(env_id: str, settings: Any, resume: bool, quiet: bool) -> dict[str, Any]:
    """One env's run; any failure is reported for this env and the others go on."""
    from sandbox import SandboxError
    from trainer.loop import GRPORun

    from trainer.stop import TrainingStopped

    total = settings.grpo.iterations + settings.warm_start.steps
    start = _resumed_at(Path(settings.output_dir)) if resume else 0
    with _progress(quiet) as progress:
        task = progress.add_task(f"train {safe(env_id.removeprefix('trace/'))}", total=total, status="starting",
                                 completed=settings.warm_start.steps + start if start else 0)

        def advance(row: Any) -> None:
            reward = "-" if row.reward_mean is None else f"{row.reward_mean:.2f}"
            if row.phase == "heldout":  # an evaluation, not a step: the bar does not move
                progress.update(task, status=f"held-out {reward} (n={row.valid_rollouts})")
                return
            if row.phase == "warm_start":
                status, done = f"warm start loss {row.loss:.3f}", row.iteration + 1
            else:
                status = f"reward {reward} (n={row.valid_rollouts}) 0-var {row.zero_variance_share:.2f}"
                done = settings.warm_start.steps + row.iteration + 1  # a resumed run counts on from where it was
            progress.update(task, completed=done, status=status)

        try:
            run = GRPORun(env_id, settings, on_iteration=advance)
            done = run.train(resume=resume)
        except TrainingStopped as exc:
            return _stopped(env_id, settings, exc)
        except (FactoryError, SandboxError, OSError) as exc:
            progress.update(task, status="failed")
            return {"env_id": env_id, "ok": False, "error": one_line(exc), "output_dir": settings.output_dir,
                    "exit_code": exit_code(exc)}
    return {"env_id": env_id, "ok": True, "output_dir": done.output_dir, "adapter": done.adapter_dir, "curve": done.curve,
            "metrics": str(Path(done.output_dir) / "metrics.jsonl"), "summary": done.summary}


def _resumed_at(folder: Path) -> int:
    """The iteration a resumed run starts at (the progress counts on from there)."""
    from trainer import checkpoint

    found = checkpoint.latest(folder)
    try:
        return int(checkpoint.load_state(found)["iteration"]) + 1 if found else 0
    except (FactoryError, KeyError, TypeError, ValueError):
        return 0


def _stopped(env_id: str, settings: Any, exc: Any) -> dict[str, Any]:
    """The run was stopped by a signal at a safe point: what is kept, and the command that goes on."""
    signal_name = "SIGTERM" if exc.signum == 15 else "Ctrl-C" if exc.signum == 2 else f"signal {exc.signum}"
    if exc.checkpoint is not None:
        kept = f"iterations up to {exc.finished} are kept (checkpoint {exc.checkpoint})"
        how = f"run the same command with --resume (--output {settings.output_dir}) to go on from iteration {exc.finished + 1}"
    else:
        kept = "no iteration had finished, so there is nothing to resume"
        how = "run the same command again to start over"
    message = f"{env_id}: stopped by {signal_name}" + (" (the iteration in progress was abandoned)" if exc.abandoned else "") + f"; {kept}; {how}"
    return {"env_id": env_id, "ok": False, "stopped": True, "exit_code": exc.exit_code, "error": message,
            "output_dir": settings.output_dir, "checkpoint": str(exc.checkpoint) if exc.checkpoint else None,
            "last_iteration": exc.finished}


def _report(results: list[dict[str, Any]], as_json: bool) -> None:
    from trainer.report import summary_table

    if as_json:
        emit_json(results if len(results) > 1 else results[0])
        for result in results:
            if result.get("stopped"):
                errors.print(f"[yellow]stopped:[/] {safe(result['error'])}", highlight=False, soft_wrap=True)
        return
    console.print(summary_table(results))
    for result in results:
        if result["ok"]:
            console.print(f"{safe(result['env_id'])}: adapter {safe(result['adapter'])}", highlight=False, soft_wrap=True)
            if result.get("curve"):
                console.print(f"  reward curve {safe(result['curve'])}", highlight=False, soft_wrap=True)
        elif result.get("stopped"):
            errors.print(f"[yellow]stopped:[/] {safe(result['error'])}", highlight=False, soft_wrap=True)
        else:
            error = str(result["error"])  # trainer errors already start with the env id; not said twice
            named = error if error.startswith(f"{result['env_id']}:") else f"{result['env_id']}: {error}"
            errors.print(f"[bold red]failed:[/] {safe(named)}", highlight=False, soft_wrap=True)


def _collect(env_ids: list[str], settings: Any, base_url: str, path: Path, as_json: bool) -> None:
    from llm_clients import LLMConfigError, make_client, parse_llm_spec
    from llm_clients.reachability import unreachable
    from trainer.endpoint import collect_with_endpoint
    from trainer.envpool import EnvPool

    if not settings.model:
        fail("--collect-only needs --model: the model name the endpoint serves")
    try:
        spec = parse_llm_spec(f"compat:{settings.model}", base_url=base_url)
    except LLMConfigError as exc:
        fail(str(exc))
        return
    if problem := unreachable(base_url):
        fail(f"cannot reach the policy endpoint at {base_url} ({problem}): start it or fix --base-url")
    client = make_client(spec, cache=False)
    g = settings.grpo
    counts = {}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            for env_id in env_ids:
                seeds = [settings.first_env_seed + i for i in range(g.groups)]
                with EnvPool(env_id, sandbox=settings.sandbox) as pool:
                    records = collect_with_endpoint(pool, client, seeds, g.group_size, settings.rollout)
                for record in records:
                    handle.write(record.model_dump_json() + "\n")
                valid = [r for r in records if "infrastructure_error" not in r.metadata]  # not the agent's fault
                counts[env_id] = {
                    "episodes": len(records),
                    "mean_reward": sum(r.reward for r in valid) / len(valid) if valid else None,
                    "success_rate": sum(r.success for r in valid) / len(valid) if valid else None,
                    "infrastructure_errors": len(records) - len(valid),
                }
    except OSError as exc:
        fail(f"cannot write {path}: {reason(exc)}")
    except FactoryError as exc:
        fail(str(exc))
    if as_json:
        emit_json({"trajectories": str(path), "envs": counts})
        return
    from trainer.report import fmt

    for env_id, c in counts.items():
        console.print(f"{safe(env_id)}: {c['episodes']} episodes, mean reward {fmt(c['mean_reward'], 2)}, "
                      f"success {fmt(c['success_rate'], 2)}, infrastructure errors {c['infrastructure_errors']}", highlight=False)
    console.print(f"trajectories: {safe(path)}", highlight=False)
