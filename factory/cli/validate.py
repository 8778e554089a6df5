"""``factory validate``: run the validation gate on env files, folders of them, or registered envs.

One env gets its full check table; several (files, a folder, ids) get one summary table, a report each and
one exit code, and ``--junit FILE`` writes a test case per env and check for CI. An env that cannot be read is
reported and the others are still validated. The gate is imported inside the command (``factory --help``
stays fast and never reads the registry); ``--report`` and ``--junit`` are checked before the gate runs, and
verdicts are printed before any file is written, so a write that still fails costs the file, never the verdict.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from factory.cli.common import (
    JsonOption,
    RegistryOption,
    SandboxOption,
    SetOption,
    check_backend,
    console,
    emit_json,
    errors,
    fail,
    gate_config,
    parse_env_ref,
    print_sandbox,
    safe,
)
from factory.cli.junit import EnvOutcome, junit_xml
from factory.cli.paths import PathProblem, preflight_file, preflight_folder, write_atomic


def validate(
    envs: Annotated[list[str], typer.Argument(help="Env modules (.py), folders of them, or registered envs (NAME or trace/NAME-vN).", show_default=False)],
    registry: RegistryOption = None,
    sandbox: SandboxOption = "auto",
    overrides: SetOption = None,
    report_path: Annotated[Optional[Path], typer.Option("--report", help="Also write the JSON report here: a file for one env, a folder (one <env>.json each) for several.")] = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Write JUnit XML here: one test case per env and check, the counterexample as the failure text.")] = None,
    calibrate_llm: Annotated[Optional[str], typer.Option("--calibrate-llm", help="Also run the optional calibration check with this base policy (PROVIDER:MODEL).")] = None,
    calibrate_base_url: Annotated[Optional[str], typer.Option("--calibrate-base-url", help="OpenAI-compatible endpoint serving the base policy.")] = None,
    calibrate_seeds: Annotated[int, typer.Option("--calibrate-seeds", min=1, max=10_000, help="Seeds for calibration (1-10000).")] = 8,
    calibrate_k: Annotated[int, typer.Option("--calibrate-k", min=2, max=256, help="Rollouts per seed for calibration (2-256).")] = 4,
    as_json: JsonOption = False,
    inconclusive: Annotated[str, typer.Option("--inconclusive", help="What an inconclusive verdict (a figure whose interval still straddles its threshold after every seed the gate may draw) exits with: fail (1), pass (0) or error (3). A starved machine (the env got no CPU) always exits 75.", case_sensitive=False)] = "fail",
) -> None:
    """Run the validation gate on envs; exit 0 only when every required check of every env passes.

    Several envs (or a folder: every .py in it) give one summary table, one exit code (0 all passed, 1 some env
    failed, 2 some input could not be read) and, with --report DIR, one JSON report per env.

    Examples:

    factory validate my_env.py

    factory validate envs/ --report reports/ --junit reports/junit.xml

    factory validate trace/precondition_verification-v0 --report report.json --json

    factory validate my_env.py --calibrate-llm vllm:Qwen/Qwen3-8B --calibrate-base-url http://127.0.0.1:8000/v1
    """
    from factory.validation.calibration import CalibrationConfig

    check_backend(sandbox)
    if inconclusive.lower() not in INCONCLUSIVE_EXITS:
        fail(f"--inconclusive {inconclusive}: choose fail, pass or error")
    config = gate_config(overrides)
    targets = _expand(envs)
    many = len(targets) > 1 or any(Path(e).is_dir() and Path(e).suffix != ".py" for e in envs)
    _preflight(report_path, junit, many)
    policy = _calibration_policy(calibrate_llm, calibrate_base_url)
    calibration = CalibrationConfig(seeds=calibrate_seeds, group_size=calibrate_k)
    outcomes: list[EnvOutcome] = []
    sources = [_source(reference, registry, label) for label, reference in targets]  # every input read before the first gate
    for index, ((label, _), (source, problem)) in enumerate(zip(targets, sources), start=1):
        if problem is not None:
            if not many:
                fail(problem)
            errors.print(f"[bold red]error:[/] {safe(problem)}", highlight=False, soft_wrap=True)
            outcomes.append(EnvOutcome(label, error=problem))
            continue
        step = f" ({index}/{len(targets)})" if many else ""
        outcomes.append(_validate_one(label + step, label, source, config, sandbox, policy, calibration, as_json, many))
    _print(outcomes, as_json, many)
    _write(outcomes, report_path, junit, many)
    if any(o.report is None for o in outcomes):
        raise typer.Exit(2)
    raise typer.Exit(verdict_exit([o.report for o in outcomes if o.report], inconclusive.lower()))


INCONCLUSIVE_EXITS = {"fail": 1, "pass": 0, "error": 3}
STARVED_EXIT = 75  # EX_TEMPFAIL: the machine, not the env; rerun later


def verdict_exit(reports: list[Any], inconclusive: str = "fail") -> int:
    """1 if an env failed, else 75 if the machine starved a run (one line says so), else the chosen code for an
    inconclusive verdict, else 0."""
    statuses = {r.status for r in reports}
    if "failed" in statuses:
        return 1
    if "starved" in statuses:
        for r in reports:
            if r.starved:
                errors.print(f"[bold yellow]starved:[/] {safe(r.starved)}", highlight=False, soft_wrap=True)
                break
        return STARVED_EXIT
    return INCONCLUSIVE_EXITS[inconclusive] if "inconclusive" in statuses else 0


def _expand(envs: list[str]) -> list[tuple[str, str | Path]]:
    """(label, file path or registry reference) for every env: a folder stands for its .py files, sorted."""
    targets: list[tuple[str, str | Path]] = []
    for env in envs:
        path = Path(env)
        if path.is_dir() and path.suffix != ".py":  # a folder named like a module is a mistaken file, said so below
            found = sorted(p for p in path.glob("*.py") if not p.name.startswith(("_", ".")))
            if not found:
                fail(f"{env}: no env modules (.py files) in that folder")
            targets += [(str(p), p) for p in found]
        elif path.suffix == ".py" or path.exists() or _looks_like_path(env):
            targets.append((env if not path.exists() else str(path), path))  # a missing one is said as such ("no such file or folder"), not as a bad env name
        else:
            targets.append((env, env))
    return targets


def _looks_like_path(env: str) -> bool:
    """``envs/``, ``./x``, ``~/x``, ``a/b``: a path, never a registry reference (``NAME``, ``trace/NAME-vN``)."""
    if env.startswith(("/", "./", "../", "~")) or env.endswith(("/", os.sep)):
        return True
    return "/" in env and not env.split(":", 1)[-1].startswith("trace/")


def _preflight(report_path: Path | None, junit: Path | None, many: bool) -> None:
    try:
        if report_path is not None:
            if many:
                if report_path.exists() and not report_path.is_dir():
                    raise PathProblem(f"--report {report_path} is a file; with several envs pass a folder (one <env>.json each)")
                preflight_folder(report_path, "--report folder", "pass --report with a writable folder")
            else:
                preflight_file(report_path, "--report", "pass --report with a path in a writable folder")
        if junit is not None:
            preflight_file(junit, "--junit", "pass --junit with a path in a writable folder")
    except PathProblem as exc:
        fail(str(exc))


def _calibration_policy(calibrate_llm: str | None, base_url: str | None) -> Any:
    if not calibrate_llm:
        return None
    from llm_clients import LLMConfigError, make_client, parse_llm_spec
    from llm_clients.reachability import unreachable
    from env_registry.policy import llm_policy

    try:
        spec = parse_llm_spec(calibrate_llm, base_url=base_url)
        if spec.base_url and (problem := unreachable(spec.base_url)):
            fail(f"cannot reach the policy endpoint at {spec.base_url} ({problem}): start it or fix --calibrate-base-url")
        return llm_policy(make_client(spec, cache=False))
    except LLMConfigError as exc:
        fail(str(exc))


def _source(reference: str | Path, registry: Path | None, label: str = "") -> tuple[str, str | None]:
    """(source, None), or ("", the one line that says why it cannot be read)."""
    from schemas.files import InputFileError, read_text
    from env_registry.registry import Registry, RegistryError
    from factory.build import MAX_ENV_FILE_BYTES, declared_attribute
    from schemas.names import capability_problem

    if isinstance(reference, Path):
        if not os.path.lexists(reference):
            what, kind = ("", "folder") if (label or str(reference)).endswith(("/", os.sep)) else ("env file ", "file or folder")
            return "", f"cannot read {what}{label or reference}: no such {kind}; check the path (a registered env is NAME or trace/NAME-vN)"
        try:
            source = read_text(reference, f"cannot read env file {reference}", "a .py env module or a registered env id", MAX_ENV_FILE_BYTES)
        except InputFileError as exc:
            return "", str(exc)
        declared = declared_attribute(source, "capability")
        if declared is not None and (problem := capability_problem(declared)):  # the registry would refuse it: before the gate
            return "", f"{reference} declares a bad capability: {problem}; fix its `capability = ...` line"
        return source, None
    name, version = parse_env_ref(reference, None)
    try:
        return Registry(registry).get(name, version).source, None
    except RegistryError as exc:
        return "", str(exc)


def _validate_one(title: str, label: str, source: str, config: Any, sandbox: str, policy: Any, calibration: Any,
                  as_json: bool, many: bool) -> EnvOutcome:  # fmt: skip
    from factory.cli.progress import gate_progress
    from factory.validation.gate import Gate, validate_source
    from factory.validation.progress import report_table
    from sandbox import SandboxError

    try:
        with gate_progress(errors, f"validating {title}", extra_checks=int(policy is not None)) as bar:
            gate = Gate(config=config, backend=sandbox, progress=bar.callback, calibration_policy=policy, calibration=calibration)
            report = validate_source(source, gate)
    except SandboxError as exc:
        if not many:
            fail(str(exc), code=1)
        errors.print(f"[bold red]error:[/] {safe(label)}: {safe(exc)}", highlight=False, soft_wrap=True)
        return EnvOutcome(label, error=f"the sandbox failed: {exc}")
    if not as_json:
        if not many:
            print_sandbox(report.backend, report.backend_warning)
        if not many or not report.passed:  # several envs: the tables of the failures, then the summary
            console.print(report_table(report, f"validation of {safe(label)}"))
        verdict = "[green]PASSED[/]" if report.passed else f"[red]FAILED[/] ({safe(', '.join(c.name for c in report.failures()))})"
        if report.status in ("inconclusive", "starved"):
            verdict = f"[yellow]{report.status.upper()}[/] ({safe(', '.join(c.name for c in report.inconclusive()) or report.starved or '')})"
        console.print(f"{safe(label) + ': ' if many else ''}{verdict} in {report.seconds:.1f} s", highlight=False)
    return EnvOutcome(label, report=report)


def _print(outcomes: list[EnvOutcome], as_json: bool, many: bool) -> None:
    from factory.cli.summary import summary_table

    if as_json:
        if many:
            emit_json([{"env": o.label, "passed": bool(o.report and o.report.passed), "error": o.error,
                        "report": o.report.model_dump(mode="json") if o.report else None} for o in outcomes])  # fmt: skip
        elif outcomes and outcomes[0].report is not None:
            emit_json(outcomes[0].report)
        return
    if not many:
        return
    rows = []
    for o in outcomes:
        r = o.report
        rows.append({
            "env": o.label,
            "result": "error" if r is None else "passed" if r.passed else r.status if r.status in ("inconclusive", "starved") else "FAILED",
            "checks": "-" if r is None else f"{sum(c.passed for c in r.checks)}/{len(r.checks)} passed",
            "failed": (o.error or "") if r is None else ", ".join(c.name for c in r.failures()) or "-",
            "time": "-" if r is None else f"{r.seconds:.1f} s",
        })
    styles = {"result": lambda v: {"passed": "green", "FAILED": "red", "error": "bold red"}.get(v, "")}
    console.print(summary_table(f"factory validate: {len(outcomes)} envs", ["env", "result", "checks", "failed", "time"], rows,
                                console.width, styles, key="env"))  # fmt: skip
    passed = sum(1 for o in outcomes if o.report and o.report.passed)
    console.print(f"{passed} of {len(outcomes)} passed", highlight=False)


def _report_names(outcomes: list[EnvOutcome]) -> list[str]:
    """One file name per env: its stem or capability name, numbered when two would clash."""
    names: list[str] = []
    for o in outcomes:
        base = Path(o.label).stem if o.label.endswith(".py") else o.label.removeprefix("trace/").replace("/", "_")
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def _write(outcomes: list[EnvOutcome], report_path: Path | None, junit: Path | None, many: bool) -> None:
    from schemas.files import explain

    try:
        if report_path is not None:
            if many:
                for o, name in zip(outcomes, _report_names(outcomes)):
                    if o.report is not None:
                        write_atomic(report_path / f"{name}.json", o.report.model_dump_json(indent=2) + "\n")
            elif outcomes[0].report is not None:
                write_atomic(report_path, outcomes[0].report.model_dump_json(indent=2) + "\n")
        if junit is not None:
            write_atomic(junit, junit_xml(outcomes))
    except OSError as exc:
        fail(f"the report was not written: {explain(exc)}", code=1)
