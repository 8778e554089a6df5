"""Registration of stored envs with Gymnasium.

Gymnasium 1.x has no plugin entry points, so ``import env_registry`` registers every stored version as
``trace/<capability>-v<N>``; ``gym.make("env_registry:trace/...")`` imports this package first, so it works
with no prior import.

Registration reads folder names only, never a file: an import cannot hang on a FIFO, fail on a bad byte or
take long on a big registry, and a damaged entry cannot hide the others. Whether an entry is sound is checked
when it is made (``gym.make`` raises the registry's one-line error, with the fix, for a broken or tampered one).
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym

from env_registry.registry import Registry

NAMESPACE = "trace"
ENTRY_POINT = "env_registry.gym_env:TraceEnv"


def gym_id(capability: str, version: int) -> str:
    return f"{NAMESPACE}/{capability}-v{version}"


def register_all(root: str | Path | None = None) -> list[str]:
    """Register every stored env version not yet known to Gymnasium; returns the ids registered now. Never raises."""
    added: list[str] = []
    try:
        registry = Registry(root)
        found = registry.version_ids()
    except Exception:  # noqa: BLE001 - a registry that cannot even be named must not break an import
        return added
    for capability, version in found:
        env_id = gym_id(capability, version)
        if env_id in gym.registry:
            continue
        try:
            gym.register(
                id=env_id,
                entry_point=ENTRY_POINT,
                kwargs={"capability": capability, "version": version, "registry_root": str(registry.root)},
            )
        except Exception:  # noqa: BLE001 - one odd name must not stop the rest
            continue
        added.append(env_id)
    return added
