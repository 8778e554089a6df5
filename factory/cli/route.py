"""``factory route``: send each task to the capability adapter the frozen base model picks, or measure how
well it picks (``--eval``) against the capabilities ``factory analyze`` found lacking."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from factory.cli.common import JsonOption, RegistryOption, SandboxOption, check_backend, console, emit_json, errors, fail, interrupted, safe
from factory.cli.exits import exit_code
from schemas.errors import FactoryError, one_line, validation_message
from sandbox import SandboxError


def _alphabet(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [t.strip() for t in text.split(",")] if "," in text else list(text.strip())


def route(
    tasks: Annotated[Optional[list[Path]], typer.Argument(help="Trajectory files (τ²-bench results, τ-bench results or our JSONL): each one's first observation is routed.", show_default=False)] = None,
    text: Annotated[Optional[list[str]], typer.Option("--text", help="Route this text as a task's first user message (repeatable).")] = None,
    adapters_dir: Annotated[Optional[Path], typer.Option("--adapters", help="Folder with one adapter per capability, named after it: a PEFT adapter folder, or a `factory train` run folder.")] = None,
    adapter: Annotated[Optional[list[str]], typer.Option("--adapter", help="One adapter as CAPABILITY=PATH (repeatable).")] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="Base model folder or hub id (default: the adapters' base model).")] = None,
    capabilities: Annotated[Optional[Path], typer.Option("--capabilities", help="capabilities.json from `factory analyze`: descriptions and menu order.")] = None,
    menu: Annotated[Optional[Path], typer.Option("--menu", help="Use a menu saved with --save-menu (no sandbox needed).")] = None,
    save_menu: Annotated[Optional[Path], typer.Option("--save-menu", help="Write the menu (descriptions and demos) here for reuse.")] = None,
    debias: Annotated[bool, typer.Option("--debias", help="Average over cyclic label orders (each option takes every label once).")] = False,
    orders: Annotated[Optional[int], typer.Option("--orders", min=1, help="With --debias: how many label orders to score (default: all).")] = None,
    soft: Annotated[bool, typer.Option("--soft", help="Mix the most probable adapters by their probabilities.")] = False,
    top_p: Annotated[float, typer.Option("--top-p", min=0.01, max=1.0, help="With --soft: keep adapters until their share reaches P.")] = 0.9,
    max_adapters: Annotated[Optional[int], typer.Option("--max-adapters", min=1, help="With --soft: mix at most K adapters.")] = None,
    alphabet: Annotated[Optional[str], typer.Option("--alphabet", help="Labels, e.g. ABCDEFGH or 1,2,3 (each must be one token).")] = None,
    include_system: Annotated[bool, typer.Option("--include-system", help="Show system prompts (policies) of tasks and demos to the router.")] = False,
    evaluate: Annotated[Optional[Path], typer.Option("--eval", help="labels.jsonl (or the folder) from `factory analyze`: measure routing accuracy.")] = None,
    trajectories: Annotated[Optional[list[Path]], typer.Option("--trajectories", help="With --eval: the trajectory files the analysis read (default: its recorded sources).")] = None,
    unlabeled: Annotated[str, typer.Option("--unlabeled", help="With --eval: failures with no lacking menu capability are skipped (skip) or expected to go to the base model (base).")] = "skip",
    out: Annotated[Path, typer.Option("--out", help="With --eval: folder for routing_eval.json and confusion.png.")] = Path("routing-eval"),
    decisions_file: Annotated[Optional[Path], typer.Option("--decisions", help="Write every decision as JSONL here.")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="Route at most N tasks.")] = None,
    device: Annotated[str, typer.Option("--device", help="Torch device for the base model: cpu, cuda, cuda:1, mps.")] = "cpu",
    dtype: Annotated[str, typer.Option("--dtype", help="auto, float32, bfloat16 or float16.")] = "auto",
    registry: RegistryOption = None,
    sandbox: SandboxOption = "auto",
    as_json: JsonOption = False,
) -> None:
    """Route tasks to capability adapters with the frozen base model (TRACE's training-free router).

    The base model reads a menu (per capability: a one-token label, its description and one successful trajectory of its synthetic env, played in the sandbox) and the task's first observation; the label with the highest next-token logit picks an adapter, or none. With --eval, the failed trajectories `factory analyze` labeled are routed and scored against the capabilities found lacking in each (accuracy, per-option recall and precision, a confusion matrix table and PNG).

    Examples:

    factory route results.json --adapters adapters/ --capabilities analysis/capabilities.json

    factory route --text "I need to cancel reservation ZFA04Y" --adapters adapters/ --debias --json

    factory route --eval analysis/ --adapters adapters/ --capabilities analysis/capabilities.json --out routing-eval

    factory route traj.jsonl --adapters adapters/ --save-menu menu.json; factory route more.jsonl --menu menu.json --adapters adapters/
    """
    check_backend(sandbox)
    if unlabeled not in ("skip", "base"):
        fail(f"--unlabeled {unlabeled!r}: choose skip or base")
    if evaluate is None and not tasks and not text:
        fail("nothing to route: pass trajectory files, --text TEXT, or --eval labels.jsonl")
    if evaluate is not None and (tasks or text):
        fail("--eval routes the analysed failures; drop the task files and --text, or drop --eval")
    _preflight(out if evaluate is not None else None, save_menu, decisions_file)
    try:
        _run(locals())
    except typer.Exit:
        raise
    except SandboxError as exc:
        fail(one_line(exc), 1)
    except FactoryError as exc:
        fail(one_line(exc), 2 if exit_code(exc) == 2 or _is_setup_error(exc) else 1)
    except KeyboardInterrupt as exc:
        interrupted("; run the command again (routing keeps no partial results)", exc)
    except OSError as exc:  # a full disk or a folder gone since the preflight: the run failed; earlier outputs stay whole
        from schemas.files import explain

        fail(f"the results were not written: {explain(exc)}", 1)
    except Exception as exc:  # noqa: BLE001 - the CLI promises one line, never a traceback
        fail(f"internal error: {type(exc).__name__}: {one_line(exc)[:300]}", 1)


def _is_setup_error(exc: BaseException) -> bool:
    """The router's own errors are about what it was given (adapters, menus, labels, the model): bad input."""
    from router.errors import RouterError

    return isinstance(exc, RouterError)


def _preflight(out: Path | None, save_menu: Path | None, decisions: Path | None) -> None:
    """Everything this run writes, checked before the model loads or a sandbox starts."""
    from factory.cli.paths import PathProblem, preflight_file, preflight_folder

    try:
        if out is not None:
            preflight_folder(out, "--out folder", "pass another --out")
        for path, flag in ((save_menu, "--save-menu"), (decisions, "--decisions")):
            if path is not None:
                preflight_file(path, flag, f"pass {flag} with a path in a writable folder")
    except PathProblem as exc:
        fail(str(exc))


def _progress(enabled: bool) -> Any:
    from factory.cli.progress import progress_display

    return progress_display(errors, TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TimeRemainingColumn(), enabled=enabled, transient=True)  # fmt: skip


def _run(args: dict[str, Any]) -> None:
    from router.session import open_session

    show = True  # a bar on a terminal, a line every 10 s in a log; on stderr, so --json output stays clean
    try:
        spec = _spec(args)
    except ValidationError as exc:
        fail(validation_message(exc))
    work = _load_tasks(args) if args["evaluate"] is None else None
    labeled = _load_labeled(args) if args["evaluate"] is not None else None  # bad input fails before the model loads
    if args["menu"] is not None and not Path(args["menu"]).is_file():
        fail(f"menu {args['menu']}: no such file; write one with `factory route --save-menu {args['menu']}`")
    if args["model"] is not None:
        from factory.preflight import model_problem

        if problem := model_problem(args["model"]):
            fail(problem)
    with _progress(show) as bar:
        demos = bar.add_task("demos (sandbox)", total=None)
        session = open_session(spec, progress=lambda name, done, total: bar.update(demos, completed=done, total=total), load_adapters=False)
        bar.remove_task(demos)
        if args["save_menu"] is not None:
            from router.menu import save_menu

            save_menu(session.menu, args["save_menu"])
        for note in session.menu.notes:
            errors.print(f"[yellow]note:[/] {safe(note)}", highlight=False)
        routing = bar.add_task("routing", total=None)
        tick = lambda done, total: bar.update(routing, completed=done, total=total)  # noqa: E731
        if labeled is not None:
            from router.evaluate import evaluate_routing

            labels_path, runs, trajectories = labeled
            report = evaluate_routing(session.router, trajectories, runs, str(labels_path), args["unlabeled"], progress=tick)
        else:
            decisions = session.router.route_many(work or [], progress=tick)
    if labeled is not None:  # printed after the live progress display is gone
        _write_eval(args, report)
        return
    _write_decisions(args["decisions_file"], decisions)
    if args["as_json"]:
        emit_json([d.model_dump(mode="json") for d in decisions])
    else:
        console.print(_decisions_table(decisions, session.router.labels, session.menu.keys))
        console.print("labels: " + ", ".join(f"{label} {key}" for label, key in zip(session.router.labels, session.menu.keys)))


def _spec(args: dict[str, Any]) -> Any:
    from router.schema import RouterConfig
    from router.session import RouterSpec

    knobs: dict[str, Any] = {
        "debias": "cyclic" if args["debias"] else "none", "orders": args["orders"], "soft": args["soft"],
        "top_p": args["top_p"], "max_adapters": args["max_adapters"], "include_system": args["include_system"],
    }  # fmt: skip
    alphabet = _alphabet(args["alphabet"])
    if alphabet is not None:
        knobs["alphabet"] = alphabet
    return RouterSpec(
        model=args["model"],
        adapters_dir=str(args["adapters_dir"]) if args["adapters_dir"] else None,
        adapters={k: str(v) for k, v in _adapter_flags(args["adapter"]).items()},
        capabilities_report=str(args["capabilities"]) if args["capabilities"] else None,
        registry=str(args["registry"]) if args["registry"] else None,
        menu=str(args["menu"]) if args["menu"] else None,
        sandbox=args["sandbox"],
        device=args["device"],
        dtype=args["dtype"],
        config=RouterConfig(**knobs),
    )


def _adapter_flags(flags: list[str] | None) -> dict[str, Path]:
    from router.loading import parse_adapter_flags

    return parse_adapter_flags(flags or [])


def _load_tasks(args: dict[str, Any]) -> list[tuple[str | None, Any]]:
    from factory.analyze.importers import load_trajectories

    work: list[tuple[str | None, Any]] = []
    if args["tasks"]:
        imported = load_trajectories(list(args["tasks"]))
        work += [(t.id, t) for t in imported.trajectories]
        for skipped in imported.skipped[:5]:
            errors.print(f"[yellow]skipped[/] {safe(skipped)}", highlight=False)
    work += [(f"text-{i}", t) for i, t in enumerate(args["text"] or [], start=1)]
    if not work:
        fail("the task files hold no trajectories to route")
    return work[: args["limit"]] if args["limit"] else work


def _write_decisions(path: Path | None, decisions: list[Any]) -> None:
    from factory.cli.paths import write_atomic

    if path is not None:
        write_atomic(path, "".join(decision.model_dump_json() + "\n" for decision in decisions))


def _load_labeled(args: dict[str, Any]) -> tuple[Path, list[Any], list[Any]]:
    from factory.analyze.importers import load_trajectories
    from router.evaluate import read_labels

    labels_path, runs = read_labels(args["evaluate"])
    sources = args["trajectories"] or _recorded_sources(labels_path)
    trajectories = load_trajectories([Path(s) for s in sources]).trajectories
    if args["limit"]:
        failed = [t for t in trajectories if not t.success][: args["limit"]]
        trajectories = failed + [t for t in trajectories if t.success]
    return labels_path, runs, trajectories


def _write_eval(args: dict[str, Any], report: Any) -> None:
    from router.charts import confusion_png

    from factory.cli.paths import write_atomic
    from factory.outputs import StagedOutputs

    out: Path = args["out"]
    with StagedOutputs(out, last="routing_eval.json") as staged:  # all or nothing: a full disk keeps the last result
        confusion_png(report, staged.path("confusion.png"))
        staged.write_text("routing_eval.json", report.model_dump_json(indent=2) + "\n")
        staged.commit()
    png = out / "confusion.png"
    if args["decisions_file"] is not None:
        write_atomic(args["decisions_file"], "".join(i.model_dump_json() + "\n" for i in report.items))
    if args["as_json"]:
        emit_json(report)
    else:
        _print_eval(report, out / "routing_eval.json", png)


def _recorded_sources(labels_path: Path) -> list[str]:
    report_file = labels_path.parent / "capabilities.json"
    try:
        sources = json.loads(report_file.read_text(encoding="utf-8")).get("sources") or []
    except (OSError, ValueError, AttributeError):
        sources = []
    missing = [s for s in sources if not Path(s).exists()]
    if not sources or missing:
        why = f"{missing[0]} no longer exists" if missing else f"{report_file} records none"
        fail(f"--eval needs the analysed trajectories: {why}; pass them with --trajectories FILE")
    return sources


def _fmt(value: float | None, percent: bool = True) -> str:
    return "—" if value is None else (f"{value:.0%}" if percent else f"{value:.3f}")


def _decisions_table(decisions: list[Any], labels: list[str], keys: list[str]) -> Table:
    label_of = dict(zip(keys, labels))
    table = Table(title="routing decisions", title_justify="left")
    table.add_column("task", overflow="fold", min_width=12)
    table.add_column("route", overflow="fold")
    table.add_column("p", justify="right", no_wrap=True)
    table.add_column("next", no_wrap=True)
    for d in decisions:
        chosen = d.choice or "(base)"
        if len(d.weights) > 1:
            route_text = " + ".join(f"{label_of[k]} {w:.2f}" for k, w in d.weights.items())
        else:
            route_text = f"{d.label} {chosen}"
        top = d.top(2)
        runner = f"{label_of[top[1][0]]} {top[1][1]:.2f}" if len(top) > 1 else "—"
        table.add_row(safe(d.task_id or ""), safe(route_text), f"{d.probabilities[chosen]:.2f}", runner)
    return table


def _print_eval(report: Any, json_path: Path, png: Path) -> None:
    console.print(
        f"routing accuracy: [bold]{report.correct}/{report.n_evaluated}[/] ({_fmt(report.accuracy)}); always choosing the "
        f"most often lacking option would score {_fmt(report.majority_baseline)}"
    )
    console.print(
        f"{report.n_failures} failed trajectories; {report.n_unlabeled} lack no menu capability "
        f"({'skipped' if report.unlabeled == 'skip' else 'expected to go to the base model'})"
    )
    figures = Table(title="per option", title_justify="left")
    for column in ("label", "option", "lacking", "routed", "recall", "precision"):
        figures.add_column(column, justify="left" if column in ("label", "option") else "right", no_wrap=column != "option", overflow="fold")
    for o in report.options:
        figures.add_row(o.label, o.option, str(o.support), str(o.chosen), _fmt(o.recall), _fmt(o.precision))
    console.print(figures)
    console.print("confusion: rows are the capability found lacking, columns the route taken")
    matrix = Table(title_justify="left")
    matrix.add_column("")
    for label in report.confusion.labels:
        matrix.add_column(label, justify="right")
    for label, row in zip(report.confusion.labels, report.confusion.counts):
        matrix.add_row(label, *[str(c) if c else "·" for c in row])
    console.print(matrix)
    console.print(f"wrote {json_path} and {png}")
