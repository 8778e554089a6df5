"""Registration of stored envs with Gymnasium.

Gymnasium 1.x has no plugin entry points, so ``import env_registry`` registers every stored version as
``trace/<capability>-v<N>``; ``gym.make("env_registry:trace/...")`` imports this package first, so it works
with no prior import.

Registration reads folder names only, never a file: an import cannot hang on a FIFO, fail on a bad byte or
take long on a big registry, and a damaged entry cannot hide the others. Whether an entry is sound is checked
when it is made (``gym.make`` raises the registry's one-line error, with the fix, for a broken or tampered one).

A spec holds no machine path: its kwargs are the capability and version only, so ``env.spec`` means the
same env on every machine. Which registry root an id was registered from is kept in this process
(:func:`registered_root`); another process finds the env through ``$TRACE_FACTORY_REGISTRY`` or the
default root (a forked worker, such as an async vector env's, inherits this process's map).

This module is the one place that tells Gymnasium about an id (:func:`register_spec`, the project's only
``gym.register``; the built-in targets' ``target/...`` ids go through it too), and :func:`register_all` is the
one way in for every caller: ``import env_registry``, a build, the trainer's env pool, the pipeline. Pointing
an id at another registry root (``repoint``) changes only which root it resolves to: the spec is the same for
every root, so an id is never popped and registered again (a ``gym.make`` racing with that would find none).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import WrapperSpec

from env_registry.registry import Registry

NAMESPACE = "trace"
ENTRY_POINT = "env_registry.gym_env:TraceEnv"
GRADING_WRAPPER = WrapperSpec(name="GradeOnTruncation", entry_point="env_registry.gym_env:GradeOnTruncation", kwargs={})

_ROOTS: dict[str, Path] = {}
_LOCK = threading.RLock()


def gym_id(capability: str, version: int) -> str:
    return f"{NAMESPACE}/{capability}-v{version}"


def registered_root(capability: str, version: int | None) -> Path | None:
    """The registry root ``trace/<capability>-v<version>`` was registered from in this process, if any."""
    if version is None:
        return None
    with _LOCK:
        return _ROOTS.get(gym_id(capability, version))


def register_spec(env_id: str, entry_point: str, kwargs: dict[str, Any],
                  additional_wrappers: tuple[WrapperSpec, ...] = ()) -> bool:  # fmt: skip
    """Tell Gymnasium about ``env_id`` unless it knows it already (the project's one ``gym.register``); returns
    whether it was registered now."""
    with _LOCK:
        if env_id in gym.registry:
            return False
        gym.register(id=env_id, entry_point=entry_point, kwargs=kwargs, additional_wrappers=additional_wrappers)
    return True


def register_version(capability: str, version: int, root: str | Path | None = None, *, replace: bool = False) -> bool:
    """Register one stored version; with ``replace``, point an id already registered from another root at
    ``root`` (only the root it resolves to changes: the spec stays, never popped). An id someone else
    registered with another entry point is left alone. Returns whether the id was registered or re-pointed now."""
    env_id = gym_id(capability, version)
    resolved = Registry(root).root
    kwargs = {"capability": capability, "version": version}
    with _LOCK:
        if env_id in gym.registry:
            ours = gym.registry[env_id].entry_point == ENTRY_POINT and gym.registry[env_id].kwargs == kwargs
            if not replace or not ours or _ROOTS.get(env_id) == resolved:
                return False
            _ROOTS[env_id] = resolved
            return True
        register_spec(env_id, ENTRY_POINT, kwargs, (GRADING_WRAPPER,))  # the lock is re-entrant
        _ROOTS[env_id] = resolved
    return True


def register_all(root: str | Path | None = None, *, repoint: bool = False) -> list[str]:
    """Register every stored env version of the registry at ``root`` not yet known to Gymnasium; with
    ``repoint``, ids already registered from another root resolve to this one from now on (the pipeline:
    its run's registry wins). Returns the ids registered or re-pointed now. Never raises."""
    added: list[str] = []
    try:
        registry = Registry(root)
        found = registry.version_ids()
    except Exception:  # noqa: BLE001 - a registry that cannot even be named must not break an import
        return added
    for capability, version in found:
        try:
            if register_version(capability, version, registry.root, replace=repoint):
                added.append(gym_id(capability, version))
        except Exception:  # noqa: BLE001 - one odd name must not stop the rest
            continue
    return added
