"""``factory eval --env``: the base model and each adapter alone on a registered env's held-out seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from factory.cli.common import console, emit_json, errors, fail, interrupted, parse_env_ref, safe, use_registry
from factory.cli.summary import summary_table
from schemas.errors import FactoryError, one_line
from schemas.files import reason

ENV_ARMS = ("base", "adapters")


def _env_id(env: str, registry: Path | None) -> str:
    from env_registry.registry import Registry, RegistryError

    use_registry(registry)
    name, version = parse_env_ref(env, None)
    try:
        return Registry(registry).get(name, version).manifest.gym_id
    except RegistryError as exc:
        fail(one_line(exc))
        raise


def eval_env(args: dict[str, Any]) -> None:
    """Run ``factory eval --env`` from the command's arguments (``locals()`` of ``eval_command``)."""
    from factory.cli.paths import PathProblem, preflight_folder
    from factory.evaluate.heldout import heldout_config
    from factory.preflight import model_problem
    from router.loading import adapters_given
    from schemas.files import adapter_problem

    wanted = [a.strip() for a in args["arms"].split(",") if a.strip()]
    unknown = [a for a in wanted if a not in (*ENV_ARMS, "routed")]
    if unknown:
        fail(f"--arms {args['arms']!r}: unknown arm {unknown[0]!r}; with --env use base and/or adapters")
    wanted = [a for a in wanted if a in ENV_ARMS]  # routing picks among envs' adapters per τ² task; one env has no choice to make
    env_id = _env_id(args["env"], args["registry"])
    try:
        adapters = adapters_given(args["adapters_dir"], args["adapter"])
        for name, path in adapters.items():  # weights missing or cut short: said now, not as an arm that never ran
            if problem := adapter_problem(path, f"retrain {name} or pass another adapter"):
                fail(f"adapter {name}: {problem}")
        overrides = {"heldout.seeds": args["heldout_seeds"], "heldout.first_seed": args["first_seed"],
                     "heldout.samples": args["trials"], "heldout.temperature": args["temperature"],
                     "rollout.max_new_tokens": args["max_tokens"], "rollout.compact_tools": args["compact_tools"],
                     "sandbox": None if args["sandbox"] == "auto" else args["sandbox"],
                     "dtype": args["dtype"] if args["dtype"] != "auto" else None}  # fmt: skip
        config, source = heldout_config(env_id, adapters, args["model"], {k: v for k, v in overrides.items() if "." in k})
        config = config.model_copy(update={k: v for k, v in overrides.items() if "." not in k and v is not None})
        if "adapters" in wanted and not adapters:
            wanted.remove("adapters")
        if not wanted:
            fail("nothing to evaluate: --arms adapters needs --adapters DIR or --adapter CAPABILITY=PATH")
        if args["device"] != "cpu":
            fail("--env evaluates on the CPU with the trainer's engine; drop --device")
        preflight_folder(Path(args["out"]), "--out folder", "pass another --out")
    except PathProblem as exc:
        fail(str(exc))
    except FactoryError as exc:
        fail(one_line(exc))
    if problem := model_problem(str(config.model)):
        fail(problem)
    report = _run(env_id, config, adapters, wanted, Path(args["out"]), source, args["as_json"])
    if args["as_json"]:
        emit_json(report.model_dump(mode="json"))
    else:
        _print(report)
    if all(a.error or a.valid == 0 for a in report.arms):
        if not args["as_json"]:
            errors.print("[bold red]no arm earned a valid reward[/] (see the errors above): the evaluation failed", highlight=False)
        raise typer.Exit(1)


def _run(env_id: str, config: Any, adapters: dict[str, str], arms: list[str], out: Path, source: str | None, quiet: bool) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from factory.cli.progress import progress_display
    from factory.evaluate.heldout import run_heldout
    from sandbox import SandboxError

    try:
        with progress_display(errors, TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()) as bar:
            task = bar.add_task(f"held-out {safe(env_id)}", total=1)

            def progress(arm: str, done: int, total: int) -> None:
                bar.update(task, completed=done, total=total, description=f"held-out {safe(env_id)}: {safe(arm)}")

            return run_heldout(env_id, config, adapters, arms, out, source, progress)
    except SandboxError as exc:
        fail(one_line(exc), 1)
    except FactoryError as exc:
        fail(one_line(exc))
    except OSError as exc:
        fail(f"cannot write to {out}: {reason(exc)}", 1)
    except KeyboardInterrupt as exc:
        interrupted("; run the same command again (held-out evaluations are not resumed)", exc)
    raise AssertionError("unreachable")


def _print(report: Any) -> None:
    from factory.evaluate.heldout import columns, rows, title

    console.print(summary_table(title(report), columns(), rows(report), width=min(console.width, 80), key="arm"))
    for arm in report.arms:
        if arm.error:
            errors.print(f"[bold red]{safe(arm.arm)} failed:[/] {safe(arm.error)}", highlight=False, soft_wrap=True)
    settings = f"settings from {safe(report.settings_from)}" if report.settings_from else "default training settings"
    console.print(f"model {safe(report.model)}, {settings}, compact tools {report.compact_tools}, {report.max_new_tokens} tokens per turn",
                  highlight=False, soft_wrap=True)
    console.print(f"wrote {safe(report.out)}/results.json and {safe(report.chart)}", highlight=False, soft_wrap=True)
