"""What this host can run and hold: each backend usable or why not, and the aggregate limits it supports. Host side.

``factory sandbox status`` prints it (``scripts/sandbox-services.sh`` runs that after setting a machine up). The
limits bwrap holds depend on the host (cgroups, seccomp, root for the work dir's tmpfs), so besides the facts
below the report carries what a bwrap sandbox opened here says it could not set: the same warning every
report of a run shows.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, Field

from sandbox import AUTO_ORDER, REGISTRY, available_backends, budget, cgroups, construct, runtime, syscalls
from sandbox.docker_container import DEFAULT_IMAGE


class BackendStatus(BaseModel):
    name: str
    usable: bool
    reason: str | None = Field(None, description="why it is not usable, one line")
    isolated: bool = Field(description="False for a backend that runs code on the host (unsafe-subprocess)")
    auto: bool = Field(description="whether --sandbox auto may pick it")


class HostLimits(BaseModel):
    root: bool = Field(description="root: a private uid per sandbox, cgroups and a size-capped work dir are possible")
    cgroup_version: int | None = Field(description="1 or 2 where memory, pids and cpu controllers exist, else None")
    seccomp_filter: str | None = Field(description="the compiled syscall filter bwrap loads, if it could be built")
    seccomp_reason: str | None = Field(None, description="why there is no filter")
    bwrap_checked: bool = Field(description="a bwrap sandbox was opened here to see which limits hold")
    bwrap_warning: str | None = Field(None, description="the limits that sandbox could not set (None: all hold)")
    budget: dict[str, int] = Field(default_factory=dict, description="what all sandboxes together may hold: tasks "
                                   "(processes and threads), open files, memory in MB (sandbox.budget)")


class SandboxStatus(BaseModel):
    backends: list[BackendStatus]
    auto: str | None = Field(description="the backend --sandbox auto picks here, None if it would refuse")
    docker_image: str
    limits: HostLimits


def host_limits(bwrap_usable: bool) -> HostLimits:
    """The host's facts, and (where bwrap runs) what a sandbox opened with the default limits could not set."""
    seccomp, why = syscalls.bpf_file(str(runtime.runtime_root() / "seccomp"))
    warning: str | None = None
    checked = False
    if bwrap_usable:
        try:
            with construct("bwrap") as sb:
                warning, checked = sb.warning, True
        except Exception as exc:  # noqa: BLE001 - the probe passed a moment ago; say what went wrong instead
            warning = f"could not open a bwrap sandbox to check: {type(exc).__name__}: {exc}"[:300]
    total = budget.host_budget()
    return HostLimits(root=os.geteuid() == 0, cgroup_version=cgroups.version(), seccomp_filter=seccomp,
                      seccomp_reason=why, bwrap_checked=checked, bwrap_warning=warning,
                      budget={"tasks": total.tasks, "open_files": total.tasks * total.files_per_task,
                              "memory_mb": total.memory_mb})


def sandbox_status(refresh: bool = True) -> SandboxStatus:
    """Probe every registered backend (afresh unless ``refresh`` is False) and the host's limits."""
    reasons = available_backends(refresh)
    backends = [
        BackendStatus(name=name, usable=reasons[name] is None, reason=reasons[name],
                      isolated=not REGISTRY[name].load().unsafe, auto=name in AUTO_ORDER)
        for name in REGISTRY
    ]
    auto = next((name for name in AUTO_ORDER if reasons.get(name) is None), None)
    return SandboxStatus(backends=backends, auto=auto, docker_image=DEFAULT_IMAGE,
                         limits=host_limits(reasons.get("bwrap") is None))
