"""Where a registered env's code runs.

Env code is untrusted unless it is byte-for-byte one of the blueprints shipped with this package. Trusted
code may run in this process. Anything else runs only under an explicit, loudly labelled opt-in
(``TRACE_FACTORY_UNSAFE_INPROCESS=1``) until it can run in a sandbox worker.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from env_registry.loader import load_env
from env_registry.runner import EpisodeRunner

if TYPE_CHECKING:
    from env_registry.registry import StoredEnv

UNSAFE_ENV_VAR = "TRACE_FACTORY_UNSAFE_INPROCESS"


class UntrustedCodeError(PermissionError):
    """Refusal to execute untrusted env code in this process."""


def is_builtin_blueprint(source: str) -> bool:
    """Whether ``source`` is exactly a blueprint shipped with the installed package."""
    from factory.blueprints import blueprint_names, blueprint_source

    return any(blueprint_source(name) == source for name in blueprint_names())


def open_runner(stored: "StoredEnv") -> EpisodeRunner:
    """An in-process runner for a stored env, refusing untrusted code unless the user opted in."""
    if not is_builtin_blueprint(stored.source):
        if os.environ.get(UNSAFE_ENV_VAR) != "1":
            raise UntrustedCodeError(
                f"{stored.manifest.gym_id} is not a shipped blueprint, so its code is untrusted and will not run in "
                f"this process. Set {UNSAFE_ENV_VAR}=1 to run it UNSANDBOXED at your own risk."
            )
        print(
            f"WARNING: running untrusted env code of {stored.manifest.gym_id} UNSANDBOXED in this process "
            f"({UNSAFE_ENV_VAR}=1)",
            file=sys.stderr,
        )
    return EpisodeRunner(load_env(stored.source, module_name=f"trace_env_{stored.manifest.capability}_v{stored.manifest.version}"))
