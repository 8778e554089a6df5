"""The ``factory`` command line: one subcommand per pipeline step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from pydantic import ValidationError

from env_registry.registry import Registry, RegistryError
from factory.analyze.command import analyze_command
from factory.build import (
    BuildError,
    BuildResult,
    build_from_blueprint,
    build_with_llm,
    load_capability_report,
    resolve_capability,
    resolve_target,
)
from factory.llm import LLMClient, LLMConfigError
from factory.llm.reachability import unreachable
from factory.validation.gate import validate_source
from factory.validation.progress import GateProgress, report_table
from sandbox import BACKENDS, SandboxError
from schemas.capability import CapabilityReport
from factory.validation.calibration import CalibrationConfig
from schemas.validation import ValidationConfig

app = typer.Typer(
    name="factory",
    help="trace-factory: turn an agent's recurring failures into validated, capability-targeted training envs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
envs_app = typer.Typer(help="Inspect and manage the env registry.", no_args_is_help=True)
app.add_typer(envs_app, name="envs")
app.command("analyze")(analyze_command)

console = Console()
errors = Console(stderr=True)

RegistryOption = Annotated[
    Optional[Path],
    typer.Option("--registry", help="Registry root (default: $TRACE_FACTORY_REGISTRY or ~/.cache/trace-factory/envs)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON only.")]


def fail(message: str, code: int = 2) -> None:
    """One line on stderr, no traceback: bad input is the user's to fix, so say how."""
    errors.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


SandboxOption = Annotated[
    str,
    typer.Option(
        "--sandbox",
        help="Where env code runs: auto (docker if a daemon answers, else bwrap), bwrap, docker, e2b, "
        "or unsafe-subprocess (NO isolation; explicit opt-in).",
    ),
]
SetOption = Annotated[
    Optional[list[str]],
    typer.Option("--set", help="Override a gate threshold, e.g. --set solvability_seeds=50 (repeatable)."),
]


def _gate_config(overrides: list[str] | None) -> ValidationConfig:
    values: dict[str, str] = {}
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep or key not in ValidationConfig.model_fields:
            known = ", ".join(ValidationConfig.model_fields)
            fail(f"--set {item!r}: expected KEY=VALUE with KEY one of: {known}")
        values[key] = value
    try:
        return ValidationConfig.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        fail(f"--set {first['loc'][0]}: {first['msg']}")
        raise


def _check_backend(name: str) -> None:
    if name != "auto" and name not in BACKENDS:
        fail(f"--sandbox {name!r} is not a backend; choose one of: auto, {', '.join(BACKENDS)}")


def _print_sandbox(backend: str, warning: str | None) -> None:
    errors.print(f"sandbox: [bold]{backend}[/]", highlight=False)
    if warning:
        errors.print(f"[bold red]WARNING:[/] {warning}", highlight=False)


@app.command()
def build(
    capability: Annotated[Optional[str], typer.Option("--capability", "-c", help="Capability to build an env for.")] = None,
    description: Annotated[Optional[str], typer.Option("--description", help="Describe a new capability (needs --llm).")] = None,
    target: Annotated[Optional[str], typer.Option("--target", "-t", help="Target profile id (default: the blueprint's or the report's).")] = None,
    report: Annotated[Optional[Path], typer.Option("--report", help="capabilities.json from `factory analyze`: descriptions and failure evidence.")] = None,
    build_all: Annotated[bool, typer.Option("--all", help="Build every capability selected in --report.")] = False,
    llm: Annotated[Optional[str], typer.Option("--llm", help="Generator model, e.g. openai:gpt-4.1, anthropic:claude-opus-4-5, vllm:Qwen/Qwen3-8B (env TRACE_LLM).")] = None,
    llm_base_url: Annotated[Optional[str], typer.Option("--llm-base-url", help="OpenAI-compatible server URL (vLLM, SGLang, Ollama; env TRACE_LLM_BASE_URL).")] = None,
    max_attempts: Annotated[int, typer.Option("--max-attempts", min=1, max=50, help="Generate/validate/repair rounds before giving up.")] = 5,
    llm_timeout: Annotated[float, typer.Option("--llm-timeout", min=1, help="Seconds to wait for one LLM reply (retried on timeout).")] = 300.0,
    build_dir: Annotated[Optional[Path], typer.Option("--build-dir", help="Where every attempt's prompt, reply, code and report go (default: ~/.cache/trace-factory/builds).")] = None,
    registry: RegistryOption = None,
    sandbox: SandboxOption = "auto",
    overrides: SetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Build an env for a capability, validate it in the sandbox, and register it if it passes.

    With no LLM configured the built-in blueprint is used. With --llm the model writes the env, and the gate's failures go back to it for repair until one passes (at most --max-attempts rounds).

    Examples:

    factory build --capability precondition_verification

    factory build -c datetime_reasoning --sandbox bwrap --registry ./envs --json

    factory build -c refund_rule_lookup --description "Looks up the refund rule before promising money" --target tau2-retail --llm openai:gpt-4.1

    factory build --all --report capabilities.json --llm anthropic:claude-opus-4-5

    factory build -c precondition_verification --llm vllm:Qwen/Qwen3-32B --llm-base-url http://127.0.0.1:8000/v1
    """
    _check_backend(sandbox)
    config = _gate_config(overrides)
    try:
        analysis = load_capability_report(report) if report is not None else None
        if build_all:
            if analysis is None:
                fail("--all needs --report capabilities.json (from `factory analyze`)")
            names = [c.name for c in analysis.capabilities]  # type: ignore[union-attr]
            if not names:
                fail(f"--report {report} selects no capabilities; nothing to build")
        elif capability is None:
            fail("pass --capability NAME (or --all --report capabilities.json)")
            return
        else:
            names = [capability]
        client = _llm_client(llm, llm_base_url, llm_timeout)
        if client is None and description:
            fail("--description defines a new capability, which needs an LLM to write its env: pass --llm PROVIDER:MODEL")
        results = []
        for name in names:
            try:
                results.append(_build_one(name, description, target, analysis, client, max_attempts, build_dir, registry, sandbox, config, as_json))
            except BuildError as exc:
                if not build_all:
                    raise
                results.append(BuildResult(  # one capability that cannot be built must not stop the others
                    capability=name, target=target or "", gym_id=None, version=None, new_version=False,
                    generator="llm" if client else "blueprint", registered=False, validation="not run", sandbox=sandbox,
                    registry=str(Registry(registry).root), error=str(exc), seconds=0.0, report=None,
                ))
    except (BuildError, RegistryError, SandboxError, LLMConfigError) as exc:
        fail(str(exc))
        return
    if as_json:
        payload = [r.model_dump(mode="json") for r in results]
        print(json.dumps(payload if build_all else payload[0], indent=2))
    else:
        console.print(_build_summary(results))
        for result in results:
            if result.registered:
                console.print(f'Use it: gym.make("{result.gym_id}") after `import env_registry`.')
            else:
                console.print(f"[red]{result.capability}: not registered[/] - {result.error or 'the env failed validation'}"
                              + (f"; every attempt is in {result.build_dir}" if result.build_dir else ""))
    raise typer.Exit(0 if all(r.registered for r in results) else 1)


def _llm_client(spec_text: str | None, base_url: str | None, timeout_s: float) -> "LLMClient | None":
    """The configured generator, or None (blueprint mode). An unreachable server is caught here, not mid-build."""
    import os

    from factory.llm import make_client, parse_llm_spec

    if not (spec_text or os.environ.get("TRACE_LLM")):
        if base_url:
            fail("--llm-base-url needs --llm PROVIDER:MODEL too (e.g. --llm vllm:Qwen/Qwen3-8B)")
        return None
    spec = parse_llm_spec(spec_text, base_url=base_url)
    if spec.base_url:
        problem = unreachable(spec.base_url)
        if problem:
            fail(f"cannot reach the LLM server at {spec.base_url} ({problem}): start it or fix --llm-base-url")
    return make_client(spec, timeout_s=timeout_s)


def _build_one(
    name: str, description: str | None, target: str | None, analysis: "CapabilityReport | None", client: "LLMClient | None",
    max_attempts: int, build_dir: Path | None, registry: Path | None, sandbox: str, config: ValidationConfig, as_json: bool,
) -> BuildResult:
    if client is None:
        with GateProgress(errors, f"validating {name}", enabled=not as_json) as bar:
            result = build_from_blueprint(name, target, registry, backend=sandbox, config=config, progress=bar.callback)
        if not as_json:
            errors.print(f"{name}: built-in blueprint (no LLM configured)", highlight=False)
    else:
        chosen = resolve_capability(name, description, analysis)
        chosen_target = resolve_target(name, target, analysis)
        with GateProgress(errors, f"{name}", enabled=not as_json) as bar:
            def on_attempt(number: int, phase: str) -> None:
                bar.progress.reset(bar.task)
                bar.label = f"{name} attempt {number}/{max_attempts}: {phase}"
                bar.progress.update(bar.task, description=bar.label)

            result = build_with_llm(
                chosen, chosen_target, client, registry, build_dir, max_attempts, backend=sandbox, config=config,
                on_attempt=on_attempt, progress=bar.callback,
            )
    if not as_json:
        _print_sandbox(result.sandbox, result.sandbox_warning)
        if result.report is not None:
            console.print(report_table(result.report, f"validation of {name}" + (f" (attempt {result.attempts})" if result.generator == "llm" else "")))
    return result


def _build_summary(results: list[BuildResult]) -> Table:
    """Key/value rows for one build; one row per capability for several."""

    def cells(r: BuildResult) -> dict[str, str]:
        checks = "-"
        if r.report is not None:
            checks = f"{sum(c.passed for c in r.report.checks)}/{len(r.report.checks)} passed"
        return {
            "capability": r.capability,
            "target": r.target,
            "generator": "built-in blueprint (no LLM)" if r.generator == "blueprint" else f"llm ({r.model})",
            "sandbox": r.sandbox,
            "attempts": str(r.attempts),
            "checks": checks,
            "time": f"{r.seconds:.1f} s",
            "tokens": f"{r.input_tokens:,} in / {r.output_tokens:,} out" if r.generator == "llm" else "-",
            "cost": "-" if r.generator != "llm" else ("unknown" if r.cost_usd is None else f"${r.cost_usd:.4f}"),
            "gym id": f"[bold]{r.gym_id}[/]" if r.registered else "[red]not registered[/]",
        }

    if len(results) == 1:
        table = Table(title="factory build", show_header=False, title_justify="left")
        table.add_column(no_wrap=True)
        table.add_column(overflow="fold")
        for key, value in cells(results[0]).items():
            table.add_row(key, value)
        return table
    table = Table(title="factory build", title_justify="left")
    columns = ["capability", "generator", "attempts", "checks", "time", "cost", "gym id"]
    for column in columns:
        table.add_column(column, no_wrap=column in ("capability", "gym id"), overflow="fold")
    for r in results:
        row = cells(r)
        table.add_row(*(row[c] for c in columns))
    return table


@app.command()
def validate(
    env: Annotated[str, typer.Argument(help="Path to an env module (.py), or a registered env: NAME or trace/NAME-vN.")],
    registry: RegistryOption = None,
    sandbox: SandboxOption = "auto",
    overrides: SetOption = None,
    report_path: Annotated[Optional[Path], typer.Option("--report", help="Also write the JSON report to this file.")] = None,
    calibrate_llm: Annotated[Optional[str], typer.Option("--calibrate-llm", help="Also run the optional calibration check with this base policy (PROVIDER:MODEL).")] = None,
    calibrate_base_url: Annotated[Optional[str], typer.Option("--calibrate-base-url", help="OpenAI-compatible endpoint serving the base policy.")] = None,
    calibrate_seeds: Annotated[int, typer.Option("--calibrate-seeds", min=1, help="Seeds for calibration.")] = 8,
    calibrate_k: Annotated[int, typer.Option("--calibrate-k", min=2, help="Rollouts per seed for calibration.")] = 4,
    as_json: JsonOption = False,
) -> None:
    """Run the validation gate on an env; exit 0 only when every required check passes.

    Examples:

    factory validate my_env.py

    factory validate trace/precondition_verification-v0 --report report.json --json

    factory validate my_env.py --calibrate-llm vllm:Qwen/Qwen3-8B --calibrate-base-url http://127.0.0.1:8000/v1
    """
    _check_backend(sandbox)
    config = _gate_config(overrides)
    path = Path(env)
    if path.suffix == ".py" or path.exists():
        try:
            source = path.read_text(encoding="utf-8")
        except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError) as exc:
            fail(f"cannot read env file {path}: {exc.__class__.__name__}; pass a .py env module or a registered env id")
            return
        label = str(path)
    else:
        name, version = _parse_env_ref(env, None)
        try:
            source = Registry(registry).get(name, version).source
        except RegistryError as exc:
            fail(str(exc))
            return
        label = env
    policy = None
    if calibrate_llm:
        from factory.llm import make_client, parse_llm_spec
        from factory.validation.calibration import llm_policy

        try:
            spec = parse_llm_spec(calibrate_llm, base_url=calibrate_base_url)
            if spec.base_url and (problem := unreachable(spec.base_url)):
                fail(f"cannot reach the policy endpoint at {spec.base_url} ({problem}): start it or fix --calibrate-base-url")
            policy = llm_policy(make_client(spec, cache=False))
        except LLMConfigError as exc:
            fail(str(exc))
    calibration = CalibrationConfig(seeds=calibrate_seeds, group_size=calibrate_k)
    try:
        with GateProgress(errors, f"validating {label}", enabled=not as_json, extra_checks=int(policy is not None)) as bar:
            report = validate_source(
                source, config=config, backend=sandbox, progress=bar.callback, calibration_policy=policy, calibration=calibration
            )
    except SandboxError as exc:
        fail(str(exc))
        return
    text = report.model_dump_json(indent=2)
    if report_path is not None:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(text + "\n", encoding="utf-8")
    if as_json:
        print(text)
    else:
        _print_sandbox(report.backend, report.backend_warning)
        console.print(report_table(report, f"validation of {label}"))
        verdict = "[green]PASSED[/]" if report.passed else f"[red]FAILED[/] ({', '.join(c.name for c in report.failures())})"
        console.print(f"{verdict} in {report.seconds:.1f} s")
    raise typer.Exit(0 if report.passed else 1)


@envs_app.command("list")
def envs_list(registry: RegistryOption = None, as_json: JsonOption = False) -> None:
    """List registered envs, every version.

    Example: factory envs list --json
    """
    manifests = Registry(registry).manifests()
    if as_json:
        print(json.dumps([m.model_dump(mode="json", exclude={"tools"}) | {"gym_id": m.gym_id} for m in manifests], indent=2))
        return
    if not manifests:
        console.print("No envs registered. Build one: factory build --capability precondition_verification")
        return
    table = Table(title=f"envs in {Registry(registry).root}")
    for column in ("gym id", "target", "generator", "validation", "tools", "created"):
        table.add_column(column, no_wrap=column in ("gym id", "created"))
    for m in manifests:
        table.add_row(
            m.gym_id, m.target, m.provenance.generator, m.validation, str(len(m.tools)), m.created_at.strftime("%Y-%m-%d %H:%M")
        )
    console.print(table)


@envs_app.command("show")
def envs_show(
    capability: Annotated[str, typer.Argument(help="Capability name, or a gym id like trace/<capability>-v0.")],
    version: Annotated[Optional[int], typer.Option("--version", "-v", help="Version (default: latest).")] = None,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one env's manifest, verifying its content hash.

    Example: factory envs show precondition_verification
    """
    capability, version = _parse_env_ref(capability, version)
    try:
        stored = Registry(registry).get(capability, version)
    except RegistryError as exc:
        fail(str(exc))
        return
    manifest = stored.manifest
    if as_json:
        print(manifest.model_dump_json(indent=2))
        return
    table = Table(title=manifest.gym_id, show_header=False)
    table.add_row("target", manifest.target)
    table.add_row("description", manifest.description)
    table.add_row("tools", ", ".join(t.name for t in manifest.tools))
    table.add_row("max steps", str(manifest.max_steps))
    table.add_row("generator", manifest.provenance.generator + (f" ({manifest.provenance.model})" if manifest.provenance.model else ""))
    table.add_row("validation", manifest.validation)
    table.add_row("content hash", manifest.content_hash + " (verified)")
    table.add_row("path", str(stored.path))
    console.print(table)


@envs_app.command("remove")
def envs_remove(
    capability: Annotated[str, typer.Argument(help="Capability name, or a gym id.")],
    version: Annotated[Optional[int], typer.Option("--version", "-v", help="Only this version (default: all).")] = None,
    registry: RegistryOption = None,
) -> None:
    """Remove an env (all versions, or one).

    Example: factory envs remove precondition_verification --version 0
    """
    capability, version = _parse_env_ref(capability, version)
    try:
        removed = Registry(registry).remove(capability, version)
    except RegistryError as exc:
        fail(str(exc))
        return
    console.print(f"removed {', '.join(f'trace/{capability}-v{v}' for v in removed)}")


def _parse_env_ref(reference: str, version: int | None) -> tuple[str, int | None]:
    """Accept ``name``, ``trace/name-vN`` and ``env_registry:trace/name-vN``."""
    name = reference.split(":", 1)[-1].removeprefix("trace/")
    if "-v" in name:
        base, _, number = name.rpartition("-v")
        if number.isdigit():
            return base, version if version is not None else int(number)
    return name, version


def _usage_error_types() -> tuple[type[Exception], ...]:
    """Click's usage errors: typer >= 0.26 vendors click as ``typer._click``; older typer uses click itself."""
    found: list[type[Exception]] = []
    try:
        from typer._click.exceptions import UsageError as VendoredUsageError

        found.append(VendoredUsageError)
    except ImportError:
        pass
    try:
        import click

        found.append(click.UsageError)
    except ImportError:
        pass
    return tuple(found)


def main() -> None:
    """Entry point. Usage errors (unknown flags, missing values) get one line, like every other bad input."""
    import sys

    try:
        code = app(standalone_mode=False)
    except _usage_error_types() as exc:
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help())
            sys.exit(2)
        command = ctx.command_path if ctx is not None else "factory"
        errors.print(f"[bold red]error:[/] {exc.format_message()} (see `{command} --help`)", highlight=False, soft_wrap=True)  # type: ignore[attr-defined]
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
