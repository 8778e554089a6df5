"""Registration of stored envs with Gymnasium.

Gymnasium 1.x has no plugin entry points, so ``import env_registry`` registers every stored version as
``trace/<capability>-v<N>``; ``gym.make("env_registry:trace/...")`` imports this package first, so it works
with no prior import.
"""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym

from env_registry.registry import Registry

NAMESPACE = "trace"
ENTRY_POINT = "env_registry.gym_env:TraceEnv"


def gym_id(capability: str, version: int) -> str:
    return f"{NAMESPACE}/{capability}-v{version}"


def register_all(root: str | Path | None = None) -> list[str]:
    """Register every stored env version not yet known to Gymnasium; returns the ids registered now.

    A broken registry never breaks the import: unreadable entries are reported on stderr and skipped.
    """
    registry = Registry(root)
    added = []
    try:
        manifests = registry.manifests()
    except OSError as exc:
        print(f"trace-factory: cannot read env registry {registry.root}: {exc}", file=sys.stderr)
        return []
    for manifest in manifests:
        env_id = gym_id(manifest.capability, manifest.version)
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point=ENTRY_POINT,
            kwargs={"capability": manifest.capability, "version": manifest.version, "registry_root": str(registry.root)},
        )
        added.append(env_id)
    return added
