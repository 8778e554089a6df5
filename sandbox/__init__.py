"""Run untrusted Python in isolation behind one interface.

    from sandbox import open_sandbox
    with open_sandbox() as sb:                      # docker, else bwrap; never unsandboxed
        sb.put_files({"env.py": source})
        res = sb.exec(["python", "env.py"], timeout_s=10)
        w = sb.start_worker("env_registry.some_handler")
        w.call("reset", {"seed": 1})

Backends: ``bwrap`` (bubblewrap namespaces, non-root uid, rlimits), ``docker`` (locked-down
container, image built offline by ``python -m sandbox.image build``), ``e2b`` (remote micro-VM)
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
    WorkerError,
    WorkerTimeout,
)

BACKENDS: tuple[str, ...] = ("bwrap", "docker", "e2b", "unsafe-subprocess")

__all__ = [
    "BACKENDS",
    "Channel",
    "ExecResult",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxUnavailable",
    "Worker",
    "WorkerCrashed",
    "WorkerError",
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


def _probe(name: str, refresh: bool = False) -> str | None:
    if name == "bwrap":
        from sandbox import bwrap

        return bwrap.probe(refresh)
    if name == "docker":
        from sandbox import docker_backend

        return docker_backend.probe(refresh)
    if name == "e2b":
        from sandbox import e2b_backend

        return e2b_backend.probe()
    if name == "unsafe-subprocess":
        return None
    raise ValueError(f"unknown sandbox backend {name!r}; choose one of auto, {', '.join(BACKENDS)}")


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
    if name == "bwrap":
        from sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(limits)
    if name == "docker":
        from sandbox.docker_backend import DockerSandbox

        return DockerSandbox(limits)
    if name == "e2b":
        from sandbox.e2b_backend import E2BSandbox

        return E2BSandbox(limits)
    if name == "unsafe-subprocess":
        from sandbox.unsafe import UnsafeSubprocessSandbox

        return UnsafeSubprocessSandbox(limits)
    raise ValueError(f"unknown sandbox backend {name!r}; choose one of auto, {', '.join(BACKENDS)}")


def open_sandbox(backend: str = "auto", limits: SandboxLimits | None = None) -> Sandbox:
    """Create and open a sandbox. ``auto``: docker where its daemon answers and the image exists,
    else bwrap where a probe sandbox runs, else SandboxUnavailable - never the unsafe backend.

    The chosen backend and why are in ``sandbox.selection_reason``.
    """
    if backend == "auto":
        reasons: dict[str, str] = {}
        for name in ("docker", "bwrap"):
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
