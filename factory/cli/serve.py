"""``factory serve ENV``: a registered env as an OpenEnv server (see :mod:`factory.serve`)."""

from __future__ import annotations

import importlib.util
from typing import Annotated, Optional

import typer

from factory.cli.common import JsonOption, RegistryOption, console, emit_json, errors, fail, parse_env_ref, safe, use_registry


def serve_command(
    env: Annotated[Optional[str], typer.Argument(help="A registered env: trace/NAME-vN, or NAME (its latest version).")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (0.0.0.0 to serve other machines).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = 8000,
    max_sessions: Annotated[int, typer.Option("--max-sessions", min=1, help="Concurrent sessions (one sandboxed env each).")] = 8,
    max_steps: Annotated[Optional[int], typer.Option("--max-steps", min=1, help="The env's turn limit (default: its own).")] = None,
    registry: RegistryOption = None,
    build_image: Annotated[bool, typer.Option("--build-image", help="Build the Docker image that serves envs (offline, from this interpreter) instead.")] = False,
    tag: Annotated[str, typer.Option("--tag", help="With --build-image: the image tag.")] = "trace-factory-serve:py311",
    if_missing: Annotated[bool, typer.Option("--if-missing", help="With --build-image: skip when the tag holds an image of the same sources.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Serve a registered env over OpenEnv's protocol (WebSocket /ws, HTTP /reset /step /state, /health).

    Examples:

    factory serve trace/precondition_verification-v0 --host 0.0.0.0 --port 8000

    .venv-openenv/bin/python -m factory.cli serve --build-image --if-missing
    """
    if importlib.util.find_spec("openenv") is None or importlib.util.find_spec("fastapi") is None:
        from factory.serve import OPENENV_MISSING

        fail(OPENENV_MISSING)
    if build_image:
        _build_image(tag, if_missing, as_json)
        return
    if env is None:
        fail("give the env to serve: factory serve trace/NAME-vN (or --build-image to build the serving image)")
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


def _build_image(tag: str, if_missing: bool, as_json: bool) -> None:
    """``--build-image``: the serving image (:mod:`factory.serve_image`), one line out."""
    from factory import serve_image

    try:
        result = serve_image.build(tag, if_missing, progress=(lambda line: None) if as_json else
                                   (lambda line: errors.print(f"  {safe(line)}", highlight=False)))
    except Exception as exc:  # noqa: BLE001 - no docker SDK or daemon, no bwrap, import probe failed: one line
        fail(f"serve image build failed: {' '.join(str(exc).split())[:300]} (is dockerd running? scripts/sandbox-services.sh starts it)", 1)
    if as_json:
        emit_json(result)
    elif not result.built:
        console.print(f"image {safe(tag)} present with the same sources ({result.content_hash}); nothing to build", highlight=False)
    else:
        console.print(f"built {safe(tag)} in {result.seconds:.1f}s: {result.size_mb} MB, {result.files:,} files, "
                      f"{len(result.distributions)} distributions; run it with: {' '.join(serve_image.run_command(tag))}",
                      highlight=False, soft_wrap=True)
