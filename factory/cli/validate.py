"""``factory validate``: run the validation gate on an env file or a registered env.

The gate is imported inside the command (``factory --help`` stays fast and never reads the registry); the
``--report`` path is checked before the gate runs, and the verdict is printed before the report is written, so
a write that still fails (a full disk) costs the file, never the verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from factory.cli.common import (
    JsonOption,
    RegistryOption,
    SandboxOption,
    SetOption,
    check_backend,
    console,
    errors,
    fail,
    gate_config,
    parse_env_ref,
    print_sandbox,
    safe,
)
from factory.cli.paths import PathProblem, preflight_file, write_atomic


def validate(
    env: Annotated[str, typer.Argument(help="Path to an env module (.py), or a registered env: NAME or trace/NAME-vN.")],
    registry: RegistryOption = None,
    sandbox: SandboxOption = "auto",
    overrides: SetOption = None,
    report_path: Annotated[Optional[Path], typer.Option("--report", help="Also write the JSON report to this file.")] = None,
    calibrate_llm: Annotated[Optional[str], typer.Option("--calibrate-llm", help="Also run the optional calibration check with this base policy (PROVIDER:MODEL).")] = None,
    calibrate_base_url: Annotated[Optional[str], typer.Option("--calibrate-base-url", help="OpenAI-compatible endpoint serving the base policy.")] = None,
    calibrate_seeds: Annotated[int, typer.Option("--calibrate-seeds", min=1, max=10_000, help="Seeds for calibration (1-10000).")] = 8,
    calibrate_k: Annotated[int, typer.Option("--calibrate-k", min=2, max=256, help="Rollouts per seed for calibration (2-256).")] = 4,
    as_json: JsonOption = False,
) -> None:
    """Run the validation gate on an env; exit 0 only when every required check passes.

    Examples:

    factory validate my_env.py

    factory validate trace/precondition_verification-v0 --report report.json --json

    factory validate my_env.py --calibrate-llm vllm:Qwen/Qwen3-8B --calibrate-base-url http://127.0.0.1:8000/v1
    """
    from env_registry.files import InputFileError, explain, read_text
    from env_registry.registry import Registry, RegistryError
    from factory.build import MAX_ENV_FILE_BYTES
    from factory.llm import LLMConfigError
    from factory.llm.reachability import unreachable
    from factory.validation.calibration import CalibrationConfig
    from factory.validation.gate import validate_source
    from factory.validation.progress import GateProgress, report_table
    from sandbox import SandboxError

    check_backend(sandbox)
    config = gate_config(overrides)
    if report_path is not None:
        try:
            preflight_file(report_path, "--report", "pass --report with a path in a writable folder")
        except PathProblem as exc:
            fail(str(exc))
    path = Path(env)
    if path.suffix == ".py" or path.exists():
        try:
            source = read_text(path, f"cannot read env file {path}", "a .py env module or a registered env id", MAX_ENV_FILE_BYTES)
        except InputFileError as exc:
            fail(str(exc))
            return
        label = str(path)
    else:
        name, version = parse_env_ref(env, None)
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
    show_bar = not as_json and errors.is_terminal
    try:
        with GateProgress(errors, f"validating {label}", enabled=show_bar, extra_checks=int(policy is not None)) as bar:
            report = validate_source(
                source, config=config, backend=sandbox, progress=bar.callback, calibration_policy=policy, calibration=calibration
            )
    except SandboxError as exc:
        fail(str(exc))
        return
    text = report.model_dump_json(indent=2)
    if as_json:
        print(text)
    else:
        print_sandbox(report.backend, report.backend_warning)
        console.print(report_table(report, f"validation of {safe(label)}"))
        verdict = "[green]PASSED[/]" if report.passed else f"[red]FAILED[/] ({safe(', '.join(c.name for c in report.failures()))})"
        console.print(f"{verdict} in {report.seconds:.1f} s")
    if report_path is not None:
        try:
            write_atomic(report_path, text + "\n")
        except OSError as exc:
            fail(f"the report was not written: {explain(exc)}", code=1)
    raise typer.Exit(0 if report.passed else 1)
