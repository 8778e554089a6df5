"""``factory build``: turn a capability into a registered env.

Today the env comes from a built-in blueprint (the offline default). Sandboxed validation and LLM
synthesis plug in here; until validation exists, stored envs are marked ``unvalidated``.
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel

from env_registry.loader import load_env
from env_registry.registry import Registry
from factory.blueprints import blueprint_names, blueprint_source
from schemas.manifest import Provenance
from schemas.targets import builtin_target_ids


class BuildError(ValueError):
    """A build request that cannot be carried out; the message says how to fix it."""


class BuildResult(BaseModel):
    capability: str
    target: str
    version: int
    gym_id: str
    new_version: bool
    generator: str
    validation: str
    registry: str
    seconds: float


def build_from_blueprint(capability: str, target: str | None = None, registry_root: str | Path | None = None) -> BuildResult:
    """Register the shipped blueprint for ``capability`` (trusted code, so it may be loaded here)."""
    started = time.perf_counter()
    if capability not in blueprint_names():
        raise BuildError(
            f"no built-in blueprint for {capability!r} and no LLM configured; "
            f"choose one of: {', '.join(blueprint_names())}"
        )
    if target is not None and target not in builtin_target_ids():
        raise BuildError(f"unknown target {target!r}; known targets: {', '.join(builtin_target_ids())}")
    source = blueprint_source(capability)
    env = load_env(source, module_name=f"trace_blueprint_{capability}")
    if target is not None and target != env.target:
        raise BuildError(
            f"the {capability} blueprint targets {env.target!r}, not {target!r}; "
            f"drop --target or use --target {env.target}"
        )
    registry = Registry(registry_root)
    manifest, created = registry.put(
        source,
        capability=env.capability,
        target=env.target,
        tools=env.tools(),
        max_steps=env.max_steps,
        description=env.description,
        provenance=Provenance(generator="blueprint", blueprint=capability, attempts=1),
        validation="unvalidated",
    )
    from env_registry.registration import register_all

    register_all(registry.root)
    return BuildResult(
        capability=manifest.capability,
        target=manifest.target,
        version=manifest.version,
        gym_id=manifest.gym_id,
        new_version=created,
        generator="blueprint",
        validation=manifest.validation,
        registry=str(registry.root),
        seconds=round(time.perf_counter() - started, 3),
    )
