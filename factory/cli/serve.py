"""``factory serve ENV``: a registered env as an OpenEnv server (see :mod:`factory.serve`)."""

from __future__ import annotations

import importlib.util
from typing import Annotated, Optional

import typer

from factory.cli.common import RegistryOption, errors, fail, parse_env_ref, use_registry


def serve_command(
    env: Annotated[str, typer.Argument(help="A registered env: trace/NAME-vN, or NAME (its latest version).")],
    host: Annotated[str, typer.Option("--host", help="Address to listen on (0.0.0.0 to serve other machines).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = 8000,
    max_sessions: Annotated[int, typer.Option("--max-sessions", min=1, help="Concurrent sessions (one sandboxed env each).")] = 8,
    max_steps: Annotated[Optional[int], typer.Option("--max-steps", min=1, help="The env's turn limit (default: its own).")] = None,
    registry: RegistryOption = None,
) -> None:
    """Serve a registered env over OpenEnv's protocol (WebSocket /ws, HTTP /reset /step /state, /health).

    Examples:

    factory serve trace/precondition_verification-v0 --host 0.0.0.0 --port 8000
    """
    if importlib.util.find_spec("openenv") is None or importlib.util.find_spec("fastapi") is None:
        from factory.serve import OPENENV_MISSING

        fail(OPENENV_MISSING)
    use_registry(registry)
    import gymnasium as gym

    import env_registry  # noqa: F401  (registers the trace/ ids)

    name, version = parse_env_ref(env, None)
    if version is None:
        versions = sorted(int(k.rpartition("-v")[2]) for k in gym.registry if k.startswith(f"trace/{name}-v") and k.rpartition("-v")[2].isdigit())
        version = versions[-1] if versions else 0
    env_id = f"trace/{name}-v{version}"
    if env_id not in gym.registry:
        fail(f"{env}: no such registered env (see `factory envs list`; build one with `factory build`)")
    import uvicorn

    from factory.serve import make_app

    app = make_app(env_id, max_sessions=max_sessions, **({"max_steps": max_steps} if max_steps else {}))
    errors.print(f"serving {env_id} over OpenEnv at http://{host}:{port} (health: /health, sessions: /ws, up to {max_sessions})", highlight=False)
    uvicorn.run(app, host=host, port=port, log_level="warning")
