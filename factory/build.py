"""``factory build``: turn a capability into a validated, registered env.

The env source comes from a built-in blueprint (the offline default). It is validated by the sandboxed
gate, and only an env that passes every required check is registered, with its report.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path

from pydantic import BaseModel

from env_registry.registry import Registry
from factory.blueprints import blueprint_names, blueprint_source
from factory.validation.gate import ProgressCallback, validate_source
from sandbox import SandboxLimits
from schemas.manifest import Provenance
from schemas.targets import builtin_target_ids
from schemas.validation import ValidationConfig, ValidationReport


class BuildError(ValueError):
    """A build request that cannot be carried out; the message says how to fix it."""


class BuildResult(BaseModel):
    capability: str
    target: str
    gym_id: str | None
    version: int | None
    new_version: bool
    generator: str
    registered: bool
    validation: str
    sandbox: str
    sandbox_warning: str | None = None
    registry: str
    seconds: float
    report: ValidationReport


def blueprint_target(source: str) -> str | None:
    """The ``target = "..."`` class attribute of a blueprint, read from its syntax tree (no execution)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "target" for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
    return None


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
            f"no built-in blueprint for {capability!r} and no LLM configured; "
            f"choose one of: {', '.join(blueprint_names())}"
        )
    if target is not None and target not in builtin_target_ids():
        raise BuildError(f"unknown target {target!r}; known targets: {', '.join(builtin_target_ids())}")
    source = blueprint_source(capability)
    declared = blueprint_target(source)
    if target is not None and target != declared:
        raise BuildError(
            f"the {capability} blueprint targets {declared!r}, not {target!r}; drop --target or use --target {declared}"
        )
    report = validate_source(source, config=config, backend=backend, limits=limits, progress=progress)
    registry = Registry(registry_root)
    manifest = None
    created = False
    if report.passed:
        declared_env = report.env_info or {}
        manifest, created = registry.put(
            source,
            capability=declared_env["capability"],
            target=declared_env["target"],
            tools=declared_env["tools"],
            max_steps=declared_env["max_steps"],
            description=declared_env["description"],
            provenance=Provenance(generator="blueprint", blueprint=capability, attempts=1),
            report=report.model_dump(mode="json"),
            validation="passed",
        )
        from env_registry.registration import register_all

        register_all(registry.root)
    return BuildResult(
        capability=capability,
        target=declared or "",
        gym_id=manifest.gym_id if manifest else None,
        version=manifest.version if manifest else None,
        new_version=created,
        generator="blueprint",
        registered=manifest is not None,
        validation=report.status,
        sandbox=report.backend,
        sandbox_warning=report.backend_warning,
        registry=str(registry.root),
        seconds=round(time.perf_counter() - started, 3),
        report=report,
    )
