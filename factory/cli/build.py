"""``factory build``: write (blueprint, LLM or the user's own file) and validate an env, then register it if it passes.

Heavy modules (the gate, the registry, the LLM clients) are imported inside the command, so ``factory --help``
stays fast and never reads the registry.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

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
    print_sandbox,
    safe,
)
from factory.cli.paths import PathProblem, preflight_folder
from factory.cli.summary import key_value_table, summary_table

if TYPE_CHECKING:
    from factory.build import BuildResult
    from llm_clients import LLMClient
    from schemas.capability import CapabilityReport
    from schemas.validation import ValidationConfig


def build(
    capability: Annotated[Optional[str], typer.Option("--capability", "-c", help="Capability to build an env for (with --from-file: the capability the file must declare).")] = None,
    from_file: Annotated[Optional[Path], typer.Option("--from-file", help="Your own env module (.py): validate it in the sandbox and register it if it passes.")] = None,
    description: Annotated[Optional[str], typer.Option("--description", help="Describe a new capability (needs --llm).")] = None,
    target: Annotated[Optional[str], typer.Option("--target", "-t", help="Target profile id (default: the blueprint's or the report's).")] = None,
    report: Annotated[Optional[Path], typer.Option("--report", help="capabilities.json from `factory analyze`: descriptions and failure evidence.")] = None,
    build_all: Annotated[bool, typer.Option("--all", help="Build every capability selected in --report (without --report: every built-in blueprint, offline).")] = False,
    llm: Annotated[Optional[str], typer.Option("--llm", help="Generator model, e.g. openai:gpt-4.1, anthropic:claude-opus-4-5, vllm:Qwen/Qwen3-8B (env TRACE_LLM).")] = None,
    llm_base_url: Annotated[Optional[str], typer.Option("--llm-base-url", help="OpenAI-compatible server URL (vLLM, SGLang, Ollama; env TRACE_LLM_BASE_URL).")] = None,
    max_attempts: Annotated[int, typer.Option("--max-attempts", min=1, max=50, help="Generate/validate/repair rounds before giving up (1-50).")] = 5,
    llm_timeout: Annotated[float, typer.Option("--llm-timeout", min=1, max=3600, help="Seconds to wait for one LLM reply, 1-3600 (retried on timeout).")] = 300.0,
    build_dir: Annotated[Optional[Path], typer.Option("--build-dir", help="Where every attempt's prompt, reply, code and report go (default: ~/.cache/trace-factory/builds).")] = None,
    registry: RegistryOption = None,
    sandbox: SandboxOption = "auto",
    overrides: SetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Build an env for a capability, validate it in the sandbox, and register it if it passes.

    With no LLM configured the built-in blueprint is used. With --llm the model writes the env, and the gate's failures go back to it for repair until one passes (at most --max-attempts rounds). With --from-file your own module is validated and registered (provenance: file).

    Examples:

    factory build --capability precondition_verification

    factory build -c datetime_reasoning --sandbox bwrap --registry ./envs --json

    factory build --from-file my_env.py --capability refund_rule_lookup

    factory build -c refund_rule_lookup --description "Looks up the refund rule before promising money" --target tau2-retail --llm openai:gpt-4.1

    factory build --all --report capabilities.json --llm anthropic:claude-opus-4-5

    factory build -c precondition_verification --llm vllm:Qwen/Qwen3-32B --llm-base-url http://127.0.0.1:8000/v1
    """
    from env_registry.registry import Registry, RegistryError
    from factory.build import BuildError
    from schemas.capability import load_capability_report
    from llm_clients import LLMConfigError
    from sandbox import SandboxError

    from schemas.names import capability_problem

    check_backend(sandbox)
    config = gate_config(overrides)
    if capability is not None and (problem := capability_problem(capability)):
        fail(f"--capability {problem}")  # the name becomes a registry folder, a gym id and an adapter folder
    if from_file is not None:
        clash = [flag for flag, given in (("--all", build_all), ("--report", report), ("--llm", llm), ("--description", description)) if given]
        if clash:
            fail(f"--from-file registers your own module; it cannot be combined with {', '.join(clash)}")
    _check_target(target)
    try:
        analysis = load_capability_report(report, "--report", BuildError) if report is not None else None
        if from_file is not None:
            _check_declared(from_file)
            names = [capability or from_file.stem]  # the label until the gate reads what the module declares
        elif build_all and analysis is None:
            from factory.blueprints import blueprint_names

            if llm or description:
                fail("--all with --llm builds the capabilities of --report capabilities.json (from `factory analyze`); "
                     "without --report, --all builds every built-in blueprint, offline")
            names = blueprint_names()  # every built-in blueprint
        elif build_all:
            names = [c.name for c in analysis.capabilities]  # type: ignore[union-attr]
            if not names:
                fail(f"--report {report} selects no capabilities; nothing to build")
        elif capability is None:
            fail("pass --capability NAME (or --from-file PATH, --all for every built-in blueprint, or --all --report capabilities.json)")
            return
        else:
            names = [capability]
        client = None if from_file is not None else _llm_client(llm, llm_base_url, llm_timeout)
        if client is None and description:
            fail("--description defines a new capability, which needs an LLM to write its env: pass --llm PROVIDER:MODEL")
        _preflight(Registry(registry).root, client, build_dir)
        results: list[BuildResult] = []
        try:
            for name in names:
                try:
                    results.append(_build_one(name, description, target, analysis, client, max_attempts, build_dir, registry,
                                              sandbox, config, as_json, from_file, capability))
                except (BuildError, OSError) as exc:
                    if not build_all:
                        raise
                    results.append(_failed(name, target, client, sandbox, registry, exc))  # one bad capability must not stop the others
        except KeyboardInterrupt as exc:
            _stopped(results, names, exc)
    except OSError as exc:
        from schemas.files import explain

        fail(explain(exc), code=1)
        return
    except (BuildError, RegistryError, SandboxError, LLMConfigError) as exc:
        fail(str(exc))
        return
    if as_json:
        payload = [r.model_dump(mode="json") for r in results]
        emit_json(payload if build_all else payload[0])
    else:
        console.print(_build_summary(results))
        for result in results:
            if result.registered:
                console.print(f'Use it: gym.make("{safe(result.gym_id)}") after `import env_registry`.', soft_wrap=True)
            else:
                console.print(f"[red]{safe(result.capability)}: not registered[/] - {safe(result.error or 'the env failed validation')}"
                              + (f"; every attempt is in {safe(result.build_dir)}" if result.build_dir else ""), soft_wrap=True)
    raise typer.Exit(0 if all(r.registered for r in results) else 1)


def _check_target(target: str | None) -> None:
    """``--target`` names a built-in target profile: said now, before an LLM is asked or a gate runs."""
    from schemas.targets import builtin_target_ids

    if target is not None and target not in builtin_target_ids():
        fail(f"--target: unknown target {target!r}; choose one of {', '.join(builtin_target_ids())}")


def _check_declared(path: Path) -> None:
    """A module that declares a capability name the registry would refuse (``../../x``, 65 characters, empty) is
    refused before the gate runs (read from its syntax tree, never executed here)."""
    from factory.build import BuildError, declared_attribute, read_env_file
    from schemas.names import capability_problem

    try:
        declared = declared_attribute(read_env_file(path), "capability")
    except BuildError as exc:
        fail(str(exc))
    if declared is not None and (problem := capability_problem(declared)):
        fail(f"--from-file {path} declares a bad capability: {problem}; fix its `capability = ...` line")


def _stopped(results: "list[BuildResult]", names: list[str], exc: BaseException) -> None:
    """A build stopped by Ctrl-C or SIGTERM: which envs were registered (kept) and the command that goes on."""
    from factory.cli.common import interrupted

    kept = [r.capability for r in results if r.registered]
    left = [n for n in names if n not in {r.capability for r in results}]
    said = f"; registered before the stop and kept: {', '.join(kept)}" if kept else "; nothing was registered"
    again = (f"; run the same command again to build {', '.join(left[:5])}{' and more' if len(left) > 5 else ''}"
             " (a rebuild of a registered env with unchanged code keeps its version)") if left else ""
    interrupted(said + again, exc)


def _preflight(registry_root: Path, client: "LLMClient | None", build_dir: Path | None) -> None:
    """Every folder this build writes, checked before the first gate runs (the gate takes seconds to minutes)."""
    from factory.build import default_build_root

    where = [(registry_root, "registry", "pass --registry DIR or set $TRACE_FACTORY_REGISTRY")]
    if client is not None:
        where.append((build_dir or default_build_root(), "build folder", "pass --build-dir DIR or set $TRACE_FACTORY_BUILDS"))
        cache = getattr(getattr(client, "cache", None), "directory", None)
        if cache is not None:
            where.append((Path(cache), "LLM response cache", "set $TRACE_FACTORY_CACHE to a writable folder"))
    try:
        for path, what, fix in where:
            preflight_folder(path, what, fix)
    except PathProblem as exc:
        fail(str(exc))


def _failed(name: str, target: str | None, client: "LLMClient | None", sandbox: str, registry: Path | None, exc: Exception) -> "BuildResult":
    from schemas.files import explain
    from env_registry.registry import Registry
    from factory.build import BuildResult

    return BuildResult(
        capability=name, target=target or "", gym_id=None, version=None, new_version=False,
        generator="llm" if client else "blueprint", registered=False, validation="not run", sandbox=sandbox,
        registry=str(Registry(registry).root), error=explain(exc) if isinstance(exc, OSError) else str(exc), seconds=0.0, report=None,
    )


def _llm_client(spec_text: str | None, base_url: str | None, timeout_s: float) -> "LLMClient | None":
    """The configured generator, or None (blueprint mode). An unreachable server is caught here, not mid-build."""
    import os

    from llm_clients import make_client, parse_llm_spec
    from llm_clients.reachability import unreachable

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
    max_attempts: int, build_dir: Path | None, registry: Path | None, sandbox: str, config: "ValidationConfig", as_json: bool,
    from_file: Path | None = None, expect_capability: str | None = None,
) -> "BuildResult":
    from factory.validation.gate import Gate
    from factory.build import (
        build_from_blueprint,
        build_from_file,
        build_with_llm,
        check_blueprint_request,
        read_env_file,
        resolve_capability,
        resolve_target,
    )
    from factory.cli.progress import gate_progress
    from factory.validation.progress import report_table

    if from_file is not None:
        read_env_file(from_file)  # a bad path fails here, before the bar
        with gate_progress(errors, f"validating {from_file.name}") as bar:
            gate = Gate(config=config, backend=sandbox, progress=bar.callback)
            result = build_from_file(from_file, expect_capability, target, registry, gate=gate)
    elif client is None:
        check_blueprint_request(name, target)
        with gate_progress(errors, f"validating {name}") as bar:
            result = build_from_blueprint(name, target, registry, gate=Gate(config=config, backend=sandbox, progress=bar.callback))
        if not as_json:
            errors.print(f"{safe(name)}: built-in blueprint (no LLM configured)", highlight=False)
    else:
        chosen = resolve_capability(name, description, analysis)
        chosen_target = resolve_target(name, target, analysis)
        with gate_progress(errors, f"{name}") as bar:
            def on_attempt(number: int, phase: str) -> None:
                bar.progress.reset(bar.task)
                bar.label = f"{name} attempt {number}/{max_attempts}: {phase}"
                bar.progress.update(bar.task, description=bar.label)

            result = build_with_llm(
                chosen, chosen_target, client, registry, build_dir, max_attempts,
                gate=Gate(config=config, backend=sandbox, progress=bar.callback), on_attempt=on_attempt,
            )
    if not as_json:
        print_sandbox(result.sandbox, result.sandbox_warning)
        if result.report is not None:
            with_code = [a.number for a in result.attempt_log if a.code_found]
            which = f" (attempt {with_code[-1]})" if result.generator == "llm" and with_code else ""
            subject = from_file.name if from_file is not None else name
            console.print(report_table(result.report, f"validation of {safe(subject)}{which}"))
    return result


def _describe_generator(r: "BuildResult") -> str:
    if r.generator == "blueprint":
        return "built-in blueprint (no LLM)"
    if r.generator == "file":
        return "your file"
    return f"llm ({r.model})"


def _build_summary(results: list["BuildResult"]):  # noqa: ANN202 - a rich renderable
    """Key/value rows for one build; a table with one row per capability for several, stacked when too narrow."""

    def cells(r: "BuildResult") -> dict[str, str]:
        checks = "-"
        if r.report is not None:
            checks = f"{sum(c.passed for c in r.report.checks)}/{len(r.report.checks)} passed"
        return {
            "capability": r.capability,
            "target": r.target,
            "generator": _describe_generator(r),
            "sandbox": r.sandbox,
            "attempts": str(r.attempts),
            "checks": checks,
            "time": f"{r.seconds:.1f} s",
            "tokens": f"{r.input_tokens:,} in / {r.output_tokens:,} out" if r.generator == "llm" else "-",
            "cost": "-" if r.generator != "llm" else ("unknown" if r.cost_usd is None else f"${r.cost_usd:.4f}"),
            "gym id": r.gym_id if r.registered and r.gym_id else "not registered",
        }

    styles = {"gym id": lambda value: "bold" if value != "not registered" else "red"}
    if len(results) == 1:
        return key_value_table("factory build", cells(results[0]), styles)
    columns = ["capability", "generator", "attempts", "checks", "time", "cost", "gym id"]
    return summary_table("factory build", columns, [cells(r) for r in results], console.width, styles, key="capability")
