"""TRL's other face: a registered env as ``GRPOTrainer``'s ``environment_factory``, at zero glue.

    from integrations.trl_env import trace_environment
    trainer = GRPOTrainer(model=model, args=GRPOConfig(..., max_steps=N), **trace_environment("trace/wifi_on-v0"))

``trace_environment`` returns ``environment_factory`` (a class made for the env: one instance per rollout,
each holding one sandboxed ``gym.make`` env), ``reward_funcs`` and ``train_dataset`` (one row per scenario
seed: the env's system prompt and first user message as chat messages, and the ``seed`` ``reset`` replays).

What TRL sees, and why:

* **tools** are the env's own, with their full JSON schemas: TRL reads a tool's schema from the method's
  type hints and Google docstring (``transformers.utils.get_json_schema``), so each method is built with
  hints that say what the schema says: ``enum`` as ``Literal[...]``, arrays with their item types as
  ``list[T]``, nullable and union types; an object's inner properties, which hints cannot carry, are
  written into the parameter's description as JSON schema.
* **the simulated user** answers through one more tool, ``send_message_to_user``, whose result is the
  user's reply: TRL's loop ends a rollout at the first turn without a tool call, so a conversation that goes
  on needs the user's turn to come back as a tool result. The rollout's final plain-text reply is still given
  to the user (then the episode is graded), so "Your booking is cancelled." at the end counts as it would in
  ``gym.make``.
* **the reward** is the env's, through ``reward_funcs=[trace_environment_reward]`` (TRL's tool loop never
  shows an environment the final reply, a reward function sees it): it delivers that reply, grades the
  episode (one the loop left unfinished is graded on the state reached, as a truncated one) and logs **the
  reward's components** as named metrics through TRL's ``log_metric`` (``trace/<component>``).

Tool calls go to the env one per step, in the order TRL runs them; each counts towards the env's turn limit.
"""

from __future__ import annotations

import inspect
import json
import keyword
from typing import Any, Literal, Union

SEND_TO_USER = "send_message_to_user"
_RESERVED = {"reset", "get_reward", SEND_TO_USER}  # TRL's own names, and ours
_UNSET: Any = type("Unset", (), {"__repr__": lambda self: "<unset>"})()
_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}


def hint_for(schema: Any) -> tuple[Any, str]:
    """(Python type hint, extra description) that ``get_json_schema`` turns back into ``schema``; the extra text
    carries what hints cannot (an object's properties), so the model still sees it."""
    if not isinstance(schema, dict) or not schema:
        return Any, ""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(type(v) in (str, int, float, bool, type(None)) for v in enum):
        return Literal[tuple(enum)], ""  # type: ignore[valid-type]
    if "const" in schema and type(schema["const"]) in (str, int, float, bool):
        return Literal[schema["const"]], ""  # type: ignore[valid-type]
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and options:
        parts = [hint_for(option) for option in options]
        return Union[tuple(hint for hint, _ in parts)], " ".join(extra for _, extra in parts if extra)  # type: ignore[return-value]
    kind = schema.get("type")
    if isinstance(kind, list) and kind:
        parts = [hint_for({**schema, "type": each}) for each in kind]
        return Union[tuple(hint for hint, _ in parts)], " ".join(dict.fromkeys(extra for _, extra in parts if extra))  # type: ignore[return-value]
    if kind in _JSON_TYPES:
        return _JSON_TYPES[kind], ""
    if kind == "array":
        if isinstance(schema.get("items"), dict) and schema["items"]:
            item, extra = hint_for(schema["items"])
            return list[item], extra  # type: ignore[valid-type]
        return list, ""
    if kind == "object" or "properties" in schema:
        if schema.get("properties"):
            inner = {k: v for k, v in schema.items() if k in ("properties", "required", "additionalProperties")}
            return dict, f"JSON schema: {json.dumps(inner, ensure_ascii=False, separators=(',', ':'))}"
        extra_schema = schema.get("additionalProperties")
        if isinstance(extra_schema, dict) and extra_schema:
            value, extra = hint_for(extra_schema)
            return dict[str, value], extra  # type: ignore[valid-type]
        return dict, ""
    return Any, ""


def inline_refs(schema: Any, defs: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """``schema`` with local ``{"$ref": "#/$defs/X"}`` replaced by ``X`` (pydantic writes nested models so): type
    hints have no references. A reference cycle stops at depth 8 as a bare object."""
    if defs is None:
        defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})} if isinstance(schema, dict) else {}
    if isinstance(schema, list):
        return [inline_refs(item, defs, depth) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in defs:
        if depth >= 8:
            return {"type": "object"}
        return inline_refs(defs[ref.rsplit("/", 1)[-1]], defs, depth + 1)
    return {k: inline_refs(v, defs, depth) for k, v in schema.items() if k not in ("$defs", "definitions")}


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def tool_method(tool: dict[str, Any]) -> Any:
    """A method ``(self, **arguments) -> str`` whose signature, hints and docstring carry ``tool``'s schema."""
    function = tool.get("function", tool)
    name = str(function["name"])
    if name in _RESERVED or name.startswith("_") or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"tool {name!r} cannot be a TRL environment method (reserved, private or not an identifier)")
    parameters = inline_refs(function.get("parameters") or {})
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    lines = []
    for arg, schema in properties.items():
        if not str(arg).isidentifier() or keyword.iskeyword(arg) or arg == "self":
            raise ValueError(f"tool {name!r}: parameter {arg!r} cannot be a Python argument name")
        hint, extra = hint_for(schema)  # optional: a default, not Optional[...] (that would add "nullable")
        annotations[arg] = hint
        default = inspect.Parameter.empty if arg in required else _UNSET
        params.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        description = _one_line(schema.get("description") if isinstance(schema, dict) else "") or arg.replace("_", " ")
        lines.append(f"    {arg}: {(description + ' ' + extra).strip()}")

    def method(self: Any, **arguments: Any) -> str:
        return self._call_tool(name, {k: v for k, v in arguments.items() if v is not _UNSET})

    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    summary = _one_line(function.get("description")) or f"Call {name}."
    method.__doc__ = summary + ("\n\nArgs:\n" + "\n".join(lines) if lines else "") + "\n\nReturns:\n    The tool's result."
    return method


class TraceTRLEnvironment:
    """One rollout's env for TRL's tool loop (see the module docstring). Subclassed per env id with its tools."""

    env_id: str = ""
    make_kwargs: dict[str, Any] = {}

    def __init__(self) -> None:
        import gymnasium as gym

        self._env = gym.make(self.env_id, **self.make_kwargs)
        self._done = False
        self._reward: float | None = None
        self.reward_components: dict[str, float] = {}
        self.messages: list[dict[str, Any]] = []

    def reset(self, seed: int | None = None, **row: Any) -> None:
        """Replays the row's scenario; the prompt (system prompt, first user message) is already in the row."""
        if seed is None:
            from integrations.trl import seed_of

            seed = seed_of(row.get("prompt"))
        _, info = self._env.reset(seed=int(seed))
        self._done, self._reward, self.reward_components = False, None, {}
        self.messages = list(info.get("messages", []))
        return None

    def send_message_to_user(self, message: str) -> str:
        """Send a message to the user (a question, or the outcome of their request) and get their reply.

        Args:
            message: What to tell or ask the user.

        Returns:
            The user's reply.
        """
        return self._step({"role": "assistant", "content": message})

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        call = {"id": f"call_{len(self.messages)}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        return self._step({"role": "assistant", "content": None, "tool_calls": [call]})

    def _step(self, action: dict[str, Any]) -> str:
        if self._done:
            return "The conversation has ended; nothing more can be done."
        _, reward, terminated, truncated, info = self._env.step(action)
        self.messages.extend([info.get("assistant_message", action), *info.get("new_messages", [])])
        text = "\n".join(str(m.get("content") or "") for m in info.get("new_messages", []))
        if terminated or truncated:
            self._finish(float(reward), info)
            text += "\n(The conversation has ended.)"
        return text

    def _finish(self, reward: float, info: dict[str, Any]) -> None:
        self._done, self._reward = True, reward
        self.reward_components = {k: float(v) for k, v in (info.get("reward_components") or {}).items()}

    def _grade(self) -> float:
        """The env's reward for the episode; one the loop left running is graded on the state reached. Private, not
        TRL's ``get_reward``: TRL would add that as a second reward source beside :func:`trace_environment_reward`."""
        if not self._done:
            _, reward, _, _, info = self._env.unwrapped.truncate()
            self._finish(float(reward), info)
        return float(self._reward or 0.0)

    def _deliver_final(self, completion: Any) -> None:
        """The rollout's last turn, when it is text for the user (TRL's loop stops there), reaches the env's user."""
        last = completion[-1] if isinstance(completion, list) and completion else completion
        if isinstance(last, dict):
            text = last.get("content") if last.get("role") == "assistant" and not last.get("tool_calls") else None
        else:
            text = last if isinstance(last, str) else None
        if isinstance(text, list):  # content parts
            text = " ".join(str(part.get("text", "")) for part in text if isinstance(part, dict))
        if text and text.strip() and not self._done:
            self._step({"role": "assistant", "content": text})

    def _close(self) -> None:
        self._env.close()

    def __del__(self) -> None:
        try:
            self._env.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown; the sandbox worker goes with the process
            pass


def environment_factory(env_id: str, **make_kwargs: Any) -> type[TraceTRLEnvironment]:
    """The ``environment_factory`` for one registered env: a class (TRL makes one instance per rollout) whose public
    methods are the env's tools plus ``send_message_to_user``. ``make_kwargs`` go to ``gym.make`` (``max_steps``).
    Pair it with :func:`trace_environment_reward` in ``reward_funcs`` (:func:`trace_environment` does both)."""
    import gymnasium as gym

    probe = gym.make(env_id, **make_kwargs)
    try:
        _, info = probe.reset(seed=0)
        tools = info["tools"]
    finally:
        probe.close()
    namespace: dict[str, Any] = {"env_id": env_id, "make_kwargs": dict(make_kwargs), "__doc__": f"{env_id} for TRL's environment_factory."}
    for tool in tools:
        method = tool_method(tool)
        namespace[method.__name__] = method
    return type(f"TraceEnv_{env_id.replace('/', '_').replace('-', '_')}", (TraceTRLEnvironment,), namespace)


def trace_environment_reward(
    completions: list[Any], environments: list[Any] | None = None, log_metric: Any = None, **_: Any
) -> list[float | None]:
    """TRL reward function: each rollout's final reply goes to the env's user, then the env grades the episode.
    Reward components are logged through TRL's ``log_metric`` as ``trace/<component>`` (batch means)."""
    if not environments:
        raise ValueError("trace_environment_reward grades the rollouts of integrations.trl_env.environment_factory: pass it as environment_factory too")
    rewards: list[float | None] = []
    components: dict[str, list[float]] = {}
    for completion, environment in zip(completions, environments):
        if not isinstance(environment, TraceTRLEnvironment):
            rewards.append(None)  # another environment of a multi-environment run
            continue
        environment._deliver_final(completion)
        rewards.append(environment._grade())
        for name, value in environment.reward_components.items():
            components.setdefault(name, []).append(value)
    if log_metric is not None:
        for name, values in sorted(components.items()):
            log_metric(f"trace/{name}", sum(values) / len(values))
    return rewards


def trl_dataset(env_id: str, seeds: int = 256, first_seed: int = 0, **make_kwargs: Any) -> Any:
    """One row per scenario seed: ``prompt`` (the env's system prompt and first user message) and ``seed``."""
    import gymnasium as gym
    from datasets import Dataset

    if seeds < 1 or first_seed < 0:
        raise ValueError("trl_dataset needs seeds >= 1 and first_seed >= 0")
    env = gym.make(env_id, **make_kwargs)
    rows: dict[str, list[Any]] = {"prompt": [], "seed": []}
    try:
        for seed in range(first_seed, first_seed + seeds):
            _, info = env.reset(seed=seed)
            rows["prompt"].append([{"role": m["role"], "content": str(m.get("content") or "")} for m in info["messages"]])
            rows["seed"].append(seed)
    finally:
        env.close()
    return Dataset.from_dict(rows)


def trace_environment(env_id: str, *, seeds: int = 256, first_seed: int = 0, **make_kwargs: Any) -> dict[str, Any]:
    """The ``GRPOTrainer`` keyword arguments for one env through TRL's tool loop: ``environment_factory``,
    ``reward_funcs`` (the env's reward) and ``train_dataset`` (``seeds`` scenario seeds from ``first_seed``)."""
    return {
        "environment_factory": environment_factory(env_id, **make_kwargs),
        "reward_funcs": [trace_environment_reward],
        "train_dataset": trl_dataset(env_id, seeds, first_seed, **make_kwargs),
    }
