"""Real targets as Gymnasium envs: τ²-bench airline and retail, and any MCP tool server with a task file.

    import gymnasium as gym, env_registry
    env = gym.make("target/tau2-airline-v0", task_id="3")
    observation, info = env.reset(seed=0)

Host side only. Layout (httpx style): ``backend`` is the small interface a target implements; ``mcp``
(any MCP server over stdio or HTTP) and ``tau2_native`` (τ²-bench itself, when importable) implement
it; ``tasks`` reads τ² task files; ``dbhash`` computes τ²'s database hash; ``reward`` grades an episode
as τ² does; ``judge`` is the LLM judge of NL assertions; ``users`` the simulated users; ``runner`` the
episode engine; ``env`` the Gymnasium face; ``catalog`` names the targets. Importing this package only
registers ids; nothing starts until an env is reset.
"""

from __future__ import annotations

from env_registry.registration import register_spec

NAMESPACE = "target"
ENTRY_POINT = "env_registry.targets.env:TargetEnv"
GYM_TARGETS = {"tau2-airline": "tau2-airline", "tau2-retail": "tau2-retail", "mcp": "mcp"}


def gym_id(target: str, version: int = 0) -> str:
    return f"{NAMESPACE}/{target}-v{version}"


def register_targets() -> list[str]:
    """Register ``target/<name>-v0`` for every built-in target; returns the ids registered now."""
    added = []
    for name, target in GYM_TARGETS.items():
        env_id = gym_id(name)
        if register_spec(env_id, ENTRY_POINT, {"target": target}):  # the one registration site
            added.append(env_id)
    return added


register_targets()

__all__ = ["ENTRY_POINT", "NAMESPACE", "gym_id", "register_targets"]
