"""``factory build``: turn a capability into a validated, registered env.

Without an LLM the env is the built-in blueprint; with one it is synthesised, validated and repaired until it
passes. Either way the sandboxed gate decides, and only a passing env is registered, with its report and
provenance.
"""

from __future__ import annotations

import ast
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ValidationError

from schemas.files import InputFileError, explain, read_text
from env_registry.registry import Registry, RegistryError
from schemas.errors import FactoryError, one_line, validation_message
from factory.analyze.catalogue import builtin_capabilities
from factory.blueprints import blueprint_names, blueprint_source
from llm_clients import LLMClient
from factory.synthesis.loop import AttemptCallback, AttemptRecord, synthesize
from factory.validation.gate import Gate, validate_source
from schemas.capability import Capability, CapabilityReport
from schemas.manifest import Provenance
from schemas.targets import builtin_target_ids, load_target
from schemas.validation import ValidationReport

BUILD_ROOT_ENV_VAR = "TRACE_FACTORY_BUILDS"
MAX_ENV_FILE_BYTES = 1 << 20
"""An env module is a few hundred lines; a megabyte is not an env."""


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
    if configured:
        return Path(configured).expanduser()
    try:
        return Path.home() / ".cache" / "trace-factory" / "builds"
    except (RuntimeError, KeyError):
        raise BuildError(f"no home folder to keep build attempts in: set ${BUILD_ROOT_ENV_VAR} or pass --build-dir") from None


def declared_attribute(source: str, name: str) -> str | None:
    """A ``name = "..."`` string assignment in an env module (the class's ``target``, ``capability``), read from
    its syntax tree without executing it; None when absent, computed, or the source does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
    return None


def blueprint_target(source: str) -> str | None:
    """The ``target = "..."`` class attribute of a blueprint, read from its syntax tree (no execution)."""
    return declared_attribute(source, "target")


def resolve_capability(name: str, description: str | None, report: CapabilityReport | None) -> Capability:
    """The capability to build: from the analysis report, the catalogue, or ``--description``, in that order."""
    if description:
        try:
            return Capability(name=name, description=description)
        except ValidationError as exc:
            raise BuildError(f"--capability {name!r}: {validation_message(exc)} (lower-case letters, digits and _, 2-64 characters)") from None
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


def check_blueprint_request(capability: str, target: str | None) -> tuple[str, str]:
    """The blueprint's source and declared target, or a :class:`BuildError` saying why it cannot be built (no gate run)."""
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
    return source, declared


def build_from_blueprint(
    capability: str,
    target: str | None = None,
    registry_root: str | Path | None = None,
    gate: Gate | None = None,
) -> BuildResult:
    """Validate the shipped blueprint for ``capability`` in the sandbox and register it if it passes."""
    started = time.perf_counter()
    source, declared = check_blueprint_request(capability, target)
    report = validate_source(source, gate)
    provenance = Provenance(generator="blueprint", blueprint=capability, attempts=1)
    return _register_if_passed(source, report, provenance, registry_root, capability, declared, started)


def read_env_file(path: Path) -> str:
    """The source of a user's env module, or a one-line :class:`BuildError` (missing, a folder, binary, huge)."""
    try:
        return read_text(path, f"--from-file {path}", "a Python env module (.py, UTF-8)", limit=MAX_ENV_FILE_BYTES)
    except InputFileError as exc:
        raise BuildError(str(exc)) from None


def build_from_file(
    path: Path,
    capability: str | None = None,
    target: str | None = None,
    registry_root: str | Path | None = None,
    gate: Gate | None = None,
) -> BuildResult:
    """Validate a user's own env module in the sandbox and register it if it passes (provenance ``file``).

    ``capability`` and ``target``, when given, must be what the module declares: they guard against
    registering the wrong file, they do not rename it. Declarations written as plain strings are checked before
    the gate runs; computed ones after it.
    """
    started = time.perf_counter()
    source = read_env_file(path)
    if target is not None and target not in builtin_target_ids():
        raise BuildError(f"unknown target {target!r}; known targets: {', '.join(builtin_target_ids())}")
    for option, wanted in (("capability", capability), ("target", target)):
        declared = declared_attribute(source, option)
        if wanted is not None and declared is not None and declared != wanted:
            raise BuildError(
                f"--from-file {path} declares {option} {declared!r}, not {wanted!r}; drop --{option} or fix the module"
            )
    report = validate_source(source, gate)
    info = report.env_info or {}
    mismatch = next(
        (f"the module declares {key} {info.get(key)!r}, not {wanted!r}" for key, wanted in (("capability", capability), ("target", target))
         if wanted is not None and report.passed and info.get(key) != wanted),
        None,
    )
    provenance = Provenance(generator="file", file=str(Path(path).expanduser().resolve()), attempts=1)
    name = capability or info.get("capability") or declared_attribute(source, "capability") or Path(path).stem
    if mismatch:
        return _unregistered(name, target or info.get("target") or "", "file", report, registry_root, started, mismatch)
    return _register_if_passed(source, report, provenance, registry_root, name, info.get("target") or target or "", started)


def build_with_llm(
    capability: Capability,
    target: str,
    llm: LLMClient,
    registry_root: str | Path | None = None,
    build_root: Path | None = None,
    max_attempts: int = 5,
    gate: Gate | None = None,
    on_attempt: AttemptCallback | None = None,
) -> BuildResult:
    """Synthesise an env with ``llm`` (generate, validate, repair) and register it if one passes."""
    started = time.perf_counter()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    build_dir = (build_root or default_build_root()) / f"{capability.name}-{stamp}"
    usage_before = llm.usage
    result = synthesize(
        capability, load_target(target), llm, build_dir, max_attempts=max_attempts, gate=gate, on_attempt=on_attempt,
    )
    usage = llm.usage
    provenance = Provenance(
        generator="llm", model=result.model, prompt_hash=result.prompt_hash, attempts=max(1, len(result.attempts))
    )
    if result.passed and result.source is not None and result.report is not None:
        built = _register_if_passed(result.source, result.report, provenance, registry_root, capability.name, target, started)
    else:
        built = _unregistered(capability.name, target, "llm", result.report, registry_root, started, result.error, (gate or Gate()).backend)
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
    error = None
    if report.passed and report.env_info:
        declared = report.env_info
        try:
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
        except OSError as exc:
            # The gate's verdict stands; only the write failed. Say so instead of losing the verdict.
            error = f"the env passed the gate but could not be registered: {explain(exc)}"
        except (RegistryError, ValidationError) as exc:
            error = f"the env passed the gate but could not be registered: {one_line(exc)}"
        else:
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
        error=error,
        seconds=round(time.perf_counter() - started, 3),
        report=report,
    )


def _unregistered(
    capability: str, target: str, generator: str, report: ValidationReport | None, registry_root: str | Path | None,
    started: float, error: str | None, backend: str = "auto",
) -> BuildResult:
    """The result of a build that registered nothing; ``validation`` is ``not run`` when no code reached the gate."""
    return BuildResult(
        capability=capability, target=target, gym_id=None, version=None, new_version=False, generator=generator,
        registered=False, validation=report.status if report is not None else "not run",
        sandbox=report.backend if report is not None else backend,
        sandbox_warning=report.backend_warning if report is not None else None,
        registry=str(Registry(registry_root).root), seconds=round(time.perf_counter() - started, 3), report=report, error=error,
    )
