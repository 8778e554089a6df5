"""``factory build``: turn a capability into a validated, registered env.

Without an LLM the env is the built-in blueprint; with one it is synthesised, validated and repaired until it
passes. Either way the sandboxed gate decides, and only a passing env is registered, with its report and
provenance.
"""

from __future__ import annotations

from factory.errors import FactoryError

import ast
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ValidationError

from env_registry.registry import Registry
from factory.analyze.catalogue import builtin_capabilities
from factory.blueprints import blueprint_names, blueprint_source
from factory.llm import LLMClient
from factory.synthesis.loop import AttemptCallback, AttemptRecord, synthesize
from factory.validation.gate import ProgressCallback, validate_source
from sandbox import SandboxLimits
from schemas.capability import Capability, CapabilityReport
from schemas.manifest import Provenance
from schemas.targets import builtin_target_ids, load_target
from schemas.validation import ValidationConfig, ValidationReport

BUILD_ROOT_ENV_VAR = "TRACE_FACTORY_BUILDS"


class BuildError(FactoryError, ValueError):
    """A build request that cannot be carried out; the message says how to fix it."""


class BuildResult(BaseModel):
    capability: str
    target: str
    gym_id: str | None
    version: int | None
    new_version: bool
    generator: str
    model: str | None = None
    attempts: int = 1
    attempt_log: list[AttemptRecord] = []
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    registered: bool
    validation: str
    sandbox: str
    sandbox_warning: str | None = None
    registry: str
    build_dir: str | None = None
    error: str | None = None
    seconds: float
    report: ValidationReport | None


def default_build_root() -> Path:
    configured = os.environ.get(BUILD_ROOT_ENV_VAR)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "trace-factory" / "builds"


def load_capability_report(path: Path) -> CapabilityReport:
    """Read ``capabilities.json``; a bad file becomes a one-line :class:`BuildError`."""
    try:
        return CapabilityReport.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BuildError(f"--report {path}: no such file; write one with `factory analyze`") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise BuildError(f"--report {path}: not a capabilities.json from `factory analyze` ({where}: {first['msg']})") from None


def blueprint_target(source: str) -> str | None:
    """The ``target = "..."`` class attribute of a blueprint, read from its syntax tree (no execution)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "target" for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
    return None


def resolve_capability(name: str, description: str | None, report: CapabilityReport | None) -> Capability:
    """The capability to build: from the analysis report, the catalogue, or ``--description``, in that order."""
    if description:
        return Capability(name=name, description=description)
    if report is not None:
        for finding in report.capabilities + report.candidates:
            if finding.name == name:
                return finding
    for known in builtin_capabilities():
        if known.name == name:
            return known
    raise BuildError(
        f"unknown capability {name!r}: describe it with --description \"...\" (synthesis needs --llm), "
        f"or choose one of: {', '.join(c.name for c in builtin_capabilities())}"
    )


def resolve_target(capability: str, target: str | None, report: CapabilityReport | None) -> str:
    if target is not None:
        if target not in builtin_target_ids():
            raise BuildError(f"unknown target {target!r}; known targets: {', '.join(builtin_target_ids())}")
        return target
    if capability in blueprint_names():
        declared = blueprint_target(blueprint_source(capability))
        if declared:
            return declared
    if report is not None and len(report.targets) == 1 and report.targets[0] in builtin_target_ids():
        return report.targets[0]
    raise BuildError(f"no target known for {capability!r}: pass --target, one of {', '.join(builtin_target_ids())}")


def build_from_blueprint(
    capability: str,
    target: str | None = None,
    registry_root: str | Path | None = None,
    backend: str = "auto",
    config: ValidationConfig | None = None,
    limits: SandboxLimits | None = None,
    progress: ProgressCallback | None = None,
) -> BuildResult:
    """Validate the shipped blueprint for ``capability`` in the sandbox and register it if it passes."""
    started = time.perf_counter()
    if capability not in blueprint_names():
        raise BuildError(
            f"no built-in blueprint for {capability!r} and no LLM configured; pass --llm PROVIDER:MODEL "
            f"(with --description for a new capability) or choose one of: {', '.join(blueprint_names())}"
        )
    if target is not None and target not in builtin_target_ids():
        raise BuildError(f"unknown target {target!r}; known targets: {', '.join(builtin_target_ids())}")
    source = blueprint_source(capability)
    declared = blueprint_target(source) or ""
    if target is not None and target != declared:
        raise BuildError(
            f"the {capability} blueprint targets {declared!r}, not {target!r}; drop --target or use --target {declared}"
        )
    report = validate_source(source, config=config, backend=backend, limits=limits, progress=progress)
    provenance = Provenance(generator="blueprint", blueprint=capability, attempts=1)
    return _register_if_passed(source, report, provenance, registry_root, capability, declared, started)


def build_with_llm(
    capability: Capability,
    target: str,
    llm: LLMClient,
    registry_root: str | Path | None = None,
    build_root: Path | None = None,
    max_attempts: int = 5,
    backend: str = "auto",
    config: ValidationConfig | None = None,
    limits: SandboxLimits | None = None,
    on_attempt: AttemptCallback | None = None,
    progress: ProgressCallback | None = None,
) -> BuildResult:
    """Synthesise an env with ``llm`` (generate, validate, repair) and register it if one passes."""
    started = time.perf_counter()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    build_dir = (build_root or default_build_root()) / f"{capability.name}-{stamp}"
    usage_before = llm.usage
    result = synthesize(
        capability, load_target(target), llm, build_dir, max_attempts=max_attempts, config=config, backend=backend,
        limits=limits, on_attempt=on_attempt, progress=progress,
    )
    usage = llm.usage
    provenance = Provenance(
        generator="llm", model=result.model, prompt_hash=result.prompt_hash, attempts=max(1, len(result.attempts))
    )
    if result.passed and result.source is not None and result.report is not None:
        built = _register_if_passed(result.source, result.report, provenance, registry_root, capability.name, target, started)
    else:
        built = BuildResult(
            capability=capability.name, target=target, gym_id=None, version=None, new_version=False, generator="llm",
            registered=False, validation="failed", sandbox=result.report.backend if result.report else backend,
            sandbox_warning=result.report.backend_warning if result.report else None,
            registry=str(Registry(registry_root).root), seconds=0.0, report=result.report, error=result.error,
        )
    cost = None if usage.cost_usd is None or usage_before.cost_usd is None else round(usage.cost_usd - usage_before.cost_usd, 6)
    return built.model_copy(
        update={
            "model": result.model,
            "attempts": len(result.attempts),
            "attempt_log": result.attempts,
            "input_tokens": usage.input_tokens - usage_before.input_tokens,
            "output_tokens": usage.output_tokens - usage_before.output_tokens,
            "cost_usd": cost,
            "build_dir": result.build_dir,
            "seconds": round(time.perf_counter() - started, 3),
        }
    )


def _register_if_passed(
    source: str,
    report: ValidationReport,
    provenance: Provenance,
    registry_root: str | Path | None,
    capability: str,
    target: str,
    started: float,
) -> BuildResult:
    registry = Registry(registry_root)
    manifest = None
    created = False
    if report.passed and report.env_info:
        declared = report.env_info
        manifest, created = registry.put(
            source,
            capability=declared["capability"],
            target=declared["target"],
            tools=declared["tools"],
            max_steps=declared["max_steps"],
            description=declared.get("description", ""),
            provenance=provenance,
            report=report.model_dump(mode="json"),
            validation="passed",
        )
        from env_registry.registration import register_all

        register_all(registry.root)
    return BuildResult(
        capability=capability,
        target=target,
        gym_id=manifest.gym_id if manifest else None,
        version=manifest.version if manifest else None,
        new_version=created,
        generator=provenance.generator,
        registered=manifest is not None,
        validation=report.status,
        sandbox=report.backend,
        sandbox_warning=report.backend_warning,
        registry=str(registry.root),
        seconds=round(time.perf_counter() - started, 3),
        report=report,
    )
