"""Run untrusted Python in isolation behind one interface.

    from sandbox import open_sandbox
    with open_sandbox() as sb:                      # docker, else bwrap; never unsandboxed
        sb.put_files({"env.py": source})
        res = sb.exec(["python", "env.py"], timeout_s=10)
        w = sb.start_worker("trace_env.handler")
        w.call("reset", {"seed": 1})

Backends: ``bwrap`` (bubblewrap namespaces, non-root uid, rlimits), ``docker`` (locked-down
container, image built offline by ``factory sandbox build-image``), ``e2b`` (remote micro-VM)
and ``unsafe-subprocess`` (no isolation; explicit opt-in only, warns, ``sandbox.unsafe`` is True).
"""

from __future__ import annotations

from sandbox.base import (
    Channel,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
    Worker,
    WorkerCrashed,
    WorkerBadReply,
    WorkerError,
    WorkerFailure,
    WorkerTimeout,
)

import importlib
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Backend:
    """One sandbox technology: where its class lives and how to ask whether it works on this machine."""

    module: str
    sandbox_class: str
    probe: str | None  # name of a ``probe(refresh: bool) -> str | None`` in ``module``; None: always usable

    def load(self) -> type[Sandbox]:
        return getattr(importlib.import_module(self.module), self.sandbox_class)

    def why_not(self, refresh: bool = False) -> str | None:
        if self.probe is None:
            return None
        probe: Callable[[bool], str | None] = getattr(importlib.import_module(self.module), self.probe)
        return probe(refresh)


#: The one place a backend is registered: name -> implementation. The CLI help and ``auto`` read it.
REGISTRY: dict[str, Backend] = {
    "bwrap": Backend("sandbox.bwrap", "BwrapSandbox", "probe"),
    "docker": Backend("sandbox.docker_backend", "DockerSandbox", "probe"),
    "e2b": Backend("sandbox.e2b_backend", "E2BSandbox", "probe"),
    "unsafe-subprocess": Backend("sandbox.unsafe", "UnsafeSubprocessSandbox", None),
}
BACKENDS: tuple[str, ...] = tuple(REGISTRY)
#: What ``auto`` tries, in order; never the unsafe backend.
AUTO_ORDER: tuple[str, ...] = ("docker", "bwrap")

__all__ = [
    "AUTO_ORDER",
    "BACKENDS",
    "Backend",
    "Channel",
    "ExecResult",
    "REGISTRY",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxUnavailable",
    "Worker",
    "WorkerBadReply",
    "WorkerCrashed",
    "WorkerError",
    "WorkerFailure",
    "WorkerTimeout",
    "available_backends",
    "construct",
    "open_sandbox",
]

_HOW_TO_FIX = (
    "no sandbox backend is usable on this machine. Install bubblewrap (`apt-get install bubblewrap`) "
    "or Docker with the sandbox image (`scripts/sandbox-services.sh` does both), or - only for code "
    "you trust - pass `--sandbox unsafe-subprocess`."
)


def _backend(name: str) -> Backend:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown sandbox backend {name!r}; choose one of auto, {', '.join(BACKENDS)}") from None


def _probe(name: str, refresh: bool = False) -> str | None:
    return _backend(name).why_not(refresh)


def available_backends(refresh: bool = False) -> dict[str, str | None]:
    """name -> None if usable here, else a one-line reason. Probes are cached per process."""
    out: dict[str, str | None] = {}
    for name in BACKENDS:
        try:
            out[name] = _probe(name, refresh)
        except Exception as e:  # noqa: BLE001 - a broken probe means unavailable, with the reason
            out[name] = f"probe failed: {type(e).__name__}: {e}"
    return out


def construct(name: str, limits: SandboxLimits | None = None) -> Sandbox:
    """A sandbox of the named backend, not yet opened and not probed (``open_sandbox`` does both)."""
    return _backend(name).load()(limits)


def open_sandbox(backend: str = "auto", limits: SandboxLimits | None = None) -> Sandbox:
    """Create and open a sandbox. ``auto``: docker where its daemon answers and the image exists,
    else bwrap where a probe sandbox runs, else SandboxUnavailable - never the unsafe backend.

    The chosen backend and why are in ``sandbox.selection_reason``.
    """
    if backend == "auto":
        reasons: dict[str, str] = {}
        for name in AUTO_ORDER:
            why_not = _probe(name)
            if why_not is None:
                sb = construct(name, limits)
                skipped = "; ".join(f"{k}: {v}" for k, v in reasons.items())
                sb.selection_reason = f"auto: {name} is available" + (f" ({skipped})" if skipped else "")
                sb.open()
                return sb
            reasons[name] = why_not
        detail = "; ".join(f"{k}: {v}" for k, v in reasons.items())
        raise SandboxUnavailable(f"{_HOW_TO_FIX} ({detail})")
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}; choose one of auto, {', '.join(BACKENDS)}")
    if backend != "unsafe-subprocess":
        why_not = _probe(backend)
        if why_not is not None:
            raise SandboxUnavailable(f"sandbox backend {backend!r} is not usable: {why_not}")
    sb = construct(backend, limits)
    sb.selection_reason = f"backend {backend!r} requested explicitly"
    sb.open()
    return sb
