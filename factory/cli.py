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
from factory.build import BuildError, build_from_blueprint
from factory.validation.gate import validate_source
from factory.validation.progress import GateProgress, report_table
from sandbox import BACKENDS, SandboxError
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
    capability: Annotated[str, typer.Option("--capability", "-c", help="Capability to build an env for.")],
    target: Annotated[Optional[str], typer.Option("--target", "-t", help="Target profile id (default: the blueprint's).")] = None,
    registry: RegistryOption = None,
    sandbox: SandboxOption = "auto",
    overrides: SetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Build an env for a capability, validate it in the sandbox, and register it if it passes.

    Examples:

      factory build --capability precondition_verification

      factory build -c datetime_reasoning --sandbox bwrap --registry ./envs --json
    """
    _check_backend(sandbox)
    config = _gate_config(overrides)
    try:
        with GateProgress(errors, f"validating {capability}", enabled=not as_json) as bar:
            result = build_from_blueprint(capability, target, registry, backend=sandbox, config=config, progress=bar.callback)
    except (BuildError, RegistryError, SandboxError) as exc:
        fail(str(exc))
        return
    if as_json:
        print(result.model_dump_json(indent=2))
        raise typer.Exit(0 if result.registered else 1)
    _print_sandbox(result.sandbox, result.sandbox_warning)
    console.print(report_table(result.report, f"validation of {capability}"))
    table = Table(title="factory build", show_header=False)
    table.add_row("capability", result.capability)
    table.add_row("target", result.target)
    table.add_row("generator", "built-in blueprint (no LLM configured)")
    table.add_row("sandbox", result.sandbox)
    table.add_row("validation", "[green]passed[/]" if result.registered else "[red]FAILED[/] - not registered")
    if result.registered:
        table.add_row("gym id", f"[bold]{result.gym_id}[/]" + ("" if result.new_version else " (unchanged, same version)"))
    table.add_row("registry", result.registry)
    table.add_row("time", f"{result.seconds:.2f} s")
    console.print(table)
    if not result.registered:
        raise typer.Exit(1)
    console.print(f'Use it: gym.make("{result.gym_id}") after `import env_registry`.')


@app.command()
def validate(
    env: Annotated[str, typer.Argument(help="Path to an env module (.py), or a registered env: NAME or trace/NAME-vN.")],
    registry: RegistryOption = None,
    sandbox: SandboxOption = "auto",
    overrides: SetOption = None,
    report_path: Annotated[Optional[Path], typer.Option("--report", help="Also write the JSON report to this file.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Run the validation gate on an env; exit 0 only when every required check passes.

    Examples:

      factory validate my_env.py

      factory validate trace/precondition_verification-v0 --report report.json

      factory validate envs/*.py --json   (one file per call in CI; see README)
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
    try:
        with GateProgress(errors, f"validating {label}", enabled=not as_json) as bar:
            report = validate_source(source, config=config, backend=sandbox, progress=bar.callback)
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
        table.add_column(column)
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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
