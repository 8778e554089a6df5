"""``factory build``: write (blueprint or LLM) and validate an env, then register it if it passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from env_registry.registry import Registry, RegistryError
from factory.build import (
    BuildError,
    BuildResult,
    build_from_blueprint,
    build_with_llm,
    load_capability_report,
    resolve_capability,
    resolve_target,
)
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
    print_sandbox,
    safe,
)
from factory.llm import LLMClient, LLMConfigError
from factory.llm.reachability import unreachable
from factory.validation.progress import GateProgress, report_table
from sandbox import SandboxError
from schemas.capability import CapabilityReport
from schemas.validation import ValidationConfig


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
    check_backend(sandbox)
    config = gate_config(overrides)
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
        print_sandbox(result.sandbox, result.sandbox_warning)
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
