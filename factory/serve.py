"""``factory serve ENV``: a registered env as an OpenEnv server, so a trainer on another machine can use it.

OpenEnv (``openenv-core``, meta-pytorch) is the env protocol TRL's OpenEnv harness and torchforge speak:
``reset``/``step``/``state`` over a WebSocket session (``/ws``) or HTTP, plus ``/health``, ``/schema`` and
``/metadata``. The server is OpenEnv's own (``create_fastapi_app``); this module gives it the env: each
session gets its own ``gym.make`` env, hence its own sandbox worker (env code never runs in this process),
up to ``--max-sessions`` at once. An action is one assistant turn exactly as ``env.step`` takes it (raw
text, or an OpenAI message dict); an observation carries the step's text, ``reward``, ``done`` and the
env's ``info`` (messages, tools, reward components), so a client sees what ``gym.make`` returns.

    factory serve trace/precondition_verification-v0 --host 0.0.0.0 --port 8000

``openenv-core`` is the ``openenv`` extra (``scripts/setup.sh --dev`` puts it in ``.venv-openenv``: its
FastAPI and Gradio pins are kept out of the main install).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from pydantic import Field

try:
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State
except ImportError:  # the CLI reports it in one line (serve_command); nothing else imports this module
    Environment = object  # type: ignore[assignment,misc]
    Action = Observation = State = None  # type: ignore[assignment,misc]

OPENENV_MISSING = "factory serve needs OpenEnv: pip install 'trace-factory[openenv]' (or run it from .venv-openenv: bash scripts/setup.sh --dev)"


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


if Action is not None:

    class TraceAction(Action):  # type: ignore[misc,valid-type]
        """One assistant turn: raw model text (any tool-call format the env parses) or an OpenAI message dict."""

        message: str | dict[str, Any] = Field(..., description="the assistant turn, as env.step takes it")

    class TraceObservation(Observation):  # type: ignore[misc,valid-type]
        """What ``env.step`` / ``env.reset`` returned: the observation text and the info dict."""

        text: str = Field(default="", description="the new messages as text (gym's observation)")
        info: dict[str, Any] = Field(default_factory=dict, description="gym's info: messages, tools, reward components")
        terminated: bool = False
        truncated: bool = False


class TraceOpenEnv(Environment):  # type: ignore[misc,valid-type]
    """One OpenEnv session: one ``gym.make`` env (one sandbox worker) for the session's life."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    env_id = ""
    make_kwargs: dict[str, Any] = {}

    def __init__(self) -> None:
        import gymnasium as gym

        import env_registry  # noqa: F401  (registers the trace/ ids)

        super().__init__()
        self._env = gym.make(self.env_id, **self.make_kwargs)
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
        text, info = self._env.reset(seed=seed, options=kwargs.get("options"))
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0, seed=info.get("seed"))
        return TraceObservation(text=text, info=_json_safe(info), done=False, reward=0.0)

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        text, reward, terminated, truncated, info = self._env.step(action.message)
        self._state.step_count += 1
        return TraceObservation(text=text, info=_json_safe(info), done=bool(terminated or truncated), reward=float(reward),
                                terminated=bool(terminated), truncated=bool(truncated))

    @property
    def state(self) -> Any:
        return self._state

    def close(self) -> None:
        self._env.close()


def make_app(env_id: str, max_sessions: int = 8, **make_kwargs: Any) -> Any:
    """OpenEnv's FastAPI app for ``env_id``: a new env per session, ``max_sessions`` at once."""
    if Action is None:
        raise ImportError(OPENENV_MISSING)
    from openenv.core.env_server.http_server import create_fastapi_app

    session_class = type("TraceOpenEnv_" + env_id.replace("/", "_").replace("-", "_"), (TraceOpenEnv,),
                         {"env_id": env_id, "make_kwargs": dict(make_kwargs)})
    return create_fastapi_app(session_class, TraceAction, TraceObservation, max_concurrent_envs=max_sessions)
