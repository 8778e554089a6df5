"""The host side of env code: the Gymnasium face, the on-disk registry, and the hosted (sandboxed) runner.

Importing it registers stored envs with Gymnasium. Env code itself never runs here: it runs in a sandbox
worker (see ``trace_env``), and only JSON comes back. ``env_registry.sdk`` is the env SDK under the name
earlier releases used (the same module object as ``trace_env.sdk``).
"""

from __future__ import annotations

import sys

from trace_env import sdk

sys.modules[__name__ + ".sdk"] = sdk

from env_registry.registration import register_all  # noqa: E402
from env_registry.registry import IntegrityError, Registry, RegistryError, StoredEnv  # noqa: E402

__all__ = ["IntegrityError", "Registry", "RegistryError", "StoredEnv", "register_all", "sdk"]

register_all()
import env_registry.targets  # noqa: E402,F401  (registers target/<name>-v0; starts nothing)
