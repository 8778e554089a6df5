"""τ²-bench itself as a target backend, used when the ``tau2`` package is importable (an optional extra).

τ²-bench is not on PyPI and needs Python >= 3.12, so this module imports it only when a backend is
opened. It drives τ²'s own ``Environment``: the agent's tools and their JSON schemas, the domain policy,
tool calls through ``Environment.get_response`` (τ²'s exact outputs and error flags), and
``get_db_hash`` for the DB check; the gold replay is the one τ²'s ``EnvironmentEvaluator`` performs. The
simulated user and the NL judge are ours, as on every backend, so results compare across backends.
"""

from __future__ import annotations

import os
import uuid
from importlib import metadata
from pathlib import Path
from typing import Any

from env_registry.targets.backend import Replay, TargetBackend, ToolOutcome
from env_registry.targets.errors import TargetConfigError, TargetInfraError
from env_registry.targets.tasks import Action, Task, load_tasks, parse_tasks


def _tau2() -> Any:
    # τ² pulls in litellm, which fetches a price list over the network at import unless told not to.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        from loguru import logger

        logger.disable("tau2")  # τ² logs its set-up and every tool call to stderr; our results carry what matters
        from tau2.registry import registry
    except ImportError as exc:
        raise TargetConfigError(
            f"τ²-bench is not importable ({exc}); install it from its repository on Python >= 3.12, or use --backend mcp"
        ) from None
    return registry


def native_tasks(domain: str) -> list[Task]:
    """The domain's task file as τ²-bench ships it (same bytes, so the same task versions as over MCP)."""
    _tau2()
    from tau2.utils.utils import DATA_DIR

    path = Path(DATA_DIR) / "tau2" / "domains" / domain / "tasks.json"
    if path.is_file():
        return load_tasks(path)
    loader = _tau2().get_tasks_loader(domain)
    return parse_tasks([task.model_dump(mode="json") for task in loader()], f"tau2 {domain} tasks")


class Tau2NativeBackend(TargetBackend):
    name = "native"

    def __init__(self, domain: str) -> None:
        registry = _tau2()
        try:
            self._construct = registry.get_env_constructor(domain)
        except Exception as exc:  # noqa: BLE001 - τ² raises KeyError/ValueError for unknown domains
            raise TargetConfigError(f"τ²-bench has no domain {domain!r}: {exc}") from None
        self.domain = domain
        self._env: Any = None
        self._tools_env: Any = None

    def describe(self) -> str:
        try:
            version = metadata.version("tau2")
        except metadata.PackageNotFoundError:
            version = "unknown"
        return f"tau2 {version} ({self.domain})"

    def _fresh(self) -> Any:
        try:
            return self._construct()
        except Exception as exc:  # noqa: BLE001 - a missing data file, a broken install
            raise TargetInfraError(f"τ²-bench could not build the {self.domain} environment: {type(exc).__name__}: {exc}") from None

    def _any_env(self) -> Any:
        if self._env is None and self._tools_env is None:
            self._tools_env = self._fresh()
        return self._env or self._tools_env

    def tools(self) -> list[dict[str, Any]]:
        return [tool.openai_schema for tool in self._any_env().get_tools()]

    def policy(self) -> str | None:
        return str(self._any_env().get_policy())

    def reset(self) -> None:
        self._env = self._fresh()

    def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        from tau2.data_model.message import ToolCall

        if self._env is None:
            raise RuntimeError("call() before reset()")
        message = self._env.get_response(ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=arguments, requestor="assistant"))
        return ToolOutcome(str(message.content), bool(message.error))

    def state_hash(self) -> str | None:
        return None if self._env is None else self._env.get_db_hash()

    def replay(self, actions: list[Action]) -> Replay:
        env = self._fresh()
        errors = []
        for index, action in enumerate(actions):
            try:
                env.make_tool_call(action.name, requestor=action.requestor, **action.arguments)
            except Exception as exc:  # noqa: BLE001 - τ²'s evaluator swallows gold-action errors the same way
                errors.append({"index": index, "name": action.name, "error": f"{type(exc).__name__}: {exc}"[:300]})
        return Replay(env.get_db_hash(), errors)
