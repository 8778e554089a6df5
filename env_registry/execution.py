"""Where a registered env's code runs: in a persistent sandbox worker, unless the user opts out loudly.

Env code is untrusted, so the Gymnasium wrapper (and through it any trainer) only talks to it over JSON
with a sandbox worker. ``TRACE_FACTORY_UNSAFE_INPROCESS=1`` loads it into the caller's process instead -
fast, and with no isolation at all; a warning says so every time.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Protocol

from trace_env.loader import load_env
from trace_env.engine import EpisodeRunner, StepResult

if TYPE_CHECKING:
    from env_registry.registry import StoredEnv

class Runner(Protocol):
    """What the Gymnasium face drives: the episode engine, in a sandbox worker or (unsafe) in process."""

    capability: str
    tool_schemas: list[dict[str, Any]]

    def reset(self, seed: int, max_steps: int | None = None) -> StepResult: ...

    def step(self, action: Any) -> StepResult: ...

    def truncate(self) -> StepResult: ...

    def close(self) -> None: ...


UNSAFE_ENV_VAR = "TRACE_FACTORY_UNSAFE_INPROCESS"
SANDBOX_ENV_VAR = "TRACE_FACTORY_SANDBOX"


def open_runner(stored: "StoredEnv", sandbox: str | None = None) -> Runner:
    """A runner (reset/step/close) for a stored env: sandboxed by default, in-process only on opt-in."""
    module_name = f"trace_env_{stored.manifest.capability}_v{stored.manifest.version}"
    if os.environ.get(UNSAFE_ENV_VAR) == "1":
        print(
            f"WARNING: running env code of {stored.manifest.gym_id} UNSANDBOXED in this process ({UNSAFE_ENV_VAR}=1)",
            file=sys.stderr,
        )
        return EpisodeRunner(load_env(stored.source, module_name=module_name))
    from env_registry.hosted import SandboxedEnv, SandboxedRunner

    backend = sandbox or os.environ.get(SANDBOX_ENV_VAR, "auto")
    return SandboxedRunner(SandboxedEnv(stored.source, backend=backend, module_name=module_name))

