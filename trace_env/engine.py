"""The episode engine: drives one :class:`~env_registry.sdk.TaskEnv` through reset and step.

It is the trusted half of every env. It validates tool arguments against the exposed schemas, turns every
failure of the agent into an error observation and every failure of the env code into a recorded
``env_error`` (so the validation gate can see it), keeps the OpenAI-format transcript, and grades the
episode when it ends. Its inputs and outputs are JSON, so the same engine runs in-process or in a
sandbox worker behind an RPC.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from trace_env.errors import TraceEnvError
from trace_env.actions import ParsedCall, parse_action
from trace_env.sdk import EndEpisode, Episode, Reward, Scenario, TaskEnv, ToolError, ToolRecord, Turn, canonical_json

MAX_TOOL_RESULT_CHARS = 20_000


class EnvCodeError(TraceEnvError, RuntimeError):
    """The env's own code failed where no episode can continue (e.g. ``generate`` raised)."""


@dataclass
class StepResult:
    observation: str
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "observation": self.observation,
            "reward": self.reward,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "info": self.info,
        }


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def _accepted_keys(parameters: dict[str, Any]) -> set[str] | None:
    if parameters.get("additionalProperties") is True or "properties" not in parameters and parameters.get("type") != "object":
        return None
    return set(parameters.get("properties", {}))


def reward_range(env: TaskEnv) -> tuple[float, float]:
    """The env's declared ``reward_range`` as two finite floats, low < high; ``(0, 1)`` when it declares
    something unusable (the gate's interface check names the problem)."""
    try:
        low, high = (float(x) for x in env.reward_range)
    except (TypeError, ValueError):
        return 0.0, 1.0
    return (low, high) if math.isfinite(low) and math.isfinite(high) and low < high else (0.0, 1.0)


def render_messages(messages: list[dict[str, Any]]) -> str:
    """Messages as plain text, the Gymnasium observation. ``info['messages']`` keeps the structure."""
    parts = []
    for message in messages:
        role = message["role"]
        if role == "tool":
            parts.append(f"[tool {message.get('name', '')}] {message.get('content', '')}")
        else:
            parts.append(f"[{role}] {message.get('content') or ''}")
    return "\n\n".join(parts)


_VALIDATORS: dict[str, Any] = {}
_VALIDATORS_KEPT = 512


def _validator(parameters: Any) -> Any:
    """A tool's argument validator, kept by the schema's text: an env is reset thousands of times with the same
    schemas, and a jsonschema validator holds nothing between calls."""
    key = canonical_json(parameters)
    found = _VALIDATORS.get(key)
    if found is None:
        if len(_VALIDATORS) >= _VALIDATORS_KEPT:
            _VALIDATORS.clear()
        found = _VALIDATORS[key] = jsonschema.Draft202012Validator(parameters)
    return found


def warm_shipped_targets() -> None:
    """Parse every shipped target profile and build its tools' validators now, in the template process
    (:mod:`sandbox.template`, at ``load``; no env code involved): every episode process forked from it then finds
    them made instead of reading, parsing and compiling them again at each ``reset``. What a process does to its
    copy stays in that process."""
    from trace_env import targets

    for target_id in targets.builtin_target_ids():
        for tool in targets._profile(target_id)["tools"]:
            _validator(tool["function"].get("parameters", {}))


class EpisodeRunner:
    """Runs episodes of one env. Not thread-safe: one runner per concurrent episode."""

    def __init__(self, env: TaskEnv) -> None:
        self.env = env
        self.capability = env.capability
        self.tool_schemas = env.tools()
        self._validators = {schema["function"]["name"]: _validator(schema["function"].get("parameters", {}))
                            for schema in self.tool_schemas}
        # Keys a tool accepts; None when its schema allows extra keys. Real target schemas seldom say
        # additionalProperties: false, but their functions reject unknown keyword arguments all the same.
        self._accepted: dict[str, set[str] | None] = {
            schema["function"]["name"]: _accepted_keys(schema["function"].get("parameters", {})) for schema in self.tool_schemas
        }
        self.episode: Episode | None = None
        self.env_errors: list[dict[str, str]] = []
        self.done = False
        self.max_steps: int = env.max_steps

    # --- Gymnasium-shaped API -----------------------------------------------------------------
    def reset(self, seed: int, scenario: Scenario | None = None, max_steps: int | None = None) -> StepResult:
        """Start an episode. ``scenario`` may be passed when the caller already generated it for ``seed``;
        ``max_steps`` replaces the env's own turn limit for this episode (``gym.make(..., max_steps=N)``)."""
        if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
        self.max_steps = self.env.max_steps if max_steps is None else max_steps
        try:
            scenario = scenario if scenario is not None else self.env.generate(int(seed))
            if not isinstance(scenario, Scenario):
                raise TypeError(f"generate() must return sdk.Scenario, got {type(scenario).__name__}")
            system = self.env.system_prompt(scenario)
            first = self.env.first_user_message(scenario)
            state = self.env.initial_state(scenario)
        except Exception as exc:  # env bug: no episode can start
            raise EnvCodeError(f"env {self.env.capability!r} failed to reset with seed {seed}: {_describe(exc)}") from exc
        messages = [{"role": "system", "content": str(system)}, {"role": "user", "content": str(first)}]
        self.episode = Episode(scenario=scenario, state=state, messages=messages)
        self.env_errors = []
        self.done = False
        tools_text = json.dumps(self.tool_schemas, ensure_ascii=False)
        observation = f"[system]\n{system}\n\n[tools]\n{tools_text}\n\n[user] {first}"
        info = {
            "seed": int(seed),
            "capability": self.env.capability,
            "target": self.env.target,
            "scenario_hash": scenario.fingerprint(),
            "tools": self.tool_schemas,
            "messages": list(messages),
            "max_steps": self.max_steps,
            "reward_range": list(reward_range(self.env)),
        }
        return StepResult(observation=observation, info=info)

    def step(self, action: Any) -> StepResult:
        episode = self.episode
        if episode is None or self.done:
            raise RuntimeError("step() called before reset() or after the episode ended; call reset(seed) first")
        episode.steps += 1
        parsed = parse_action(action)
        new_messages: list[dict[str, Any]] = []
        assistant: dict[str, Any] = {"role": "assistant", "content": parsed.content}
        if parsed.calls:
            assistant["tool_calls"] = [
                {
                    "id": call.id or f"call_{episode.steps}_{index}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.raw_arguments},
                }
                for index, call in enumerate(parsed.calls)
            ]
        episode.messages.append(assistant)
        terminated = False
        if parsed.calls:
            for call, wire in zip(parsed.calls, assistant["tool_calls"]):
                content, ended = self._execute(call, episode)
                message = {"role": "tool", "tool_call_id": wire["id"], "name": call.name, "content": content}
                episode.messages.append(message)
                new_messages.append(message)
                if ended:
                    terminated = True
                    episode.ended_by = f"tool:{call.name}"
        else:
            reply_text, terminated = self._user_turn(episode, parsed.content or "")
            message = {"role": "user", "content": reply_text}
            episode.messages.append(message)
            new_messages.append(message)
            if terminated and episode.ended_by is None:
                episode.ended_by = "user"
        truncated = not terminated and episode.steps >= self.max_steps
        if truncated:
            episode.ended_by = "max_steps"
        info: dict[str, Any] = {"steps": episode.steps, "assistant_message": assistant, "new_messages": new_messages}
        call_errors = [{"name": call.name, "error": call.error} for call in parsed.calls if call.error]
        if call_errors:  # a turn that tried to call a tool and could not be read: visible, never silent chat
            info["call_errors"] = call_errors
        reward = 0.0
        if terminated or truncated:
            self.done = True
            graded = self.grade()
            reward = graded["total"]
            info.update(
                reward_components=graded["components"],
                reward_detail=graded,
                ended_by=episode.ended_by,
                messages=list(episode.messages),
            )
        if self.env_errors:
            info["env_errors"] = list(self.env_errors)
        return StepResult(render_messages(new_messages), reward, terminated, truncated, info)

    def truncate(self) -> StepResult:
        """End the running episode from outside (a ``TimeLimit``, a trainer's turn cap): the reward of the state
        reached, marked truncated, so a capped episode still carries signal. ``ended_by`` is ``max_steps``."""
        episode = self.episode
        if episode is None or self.done:
            raise RuntimeError("truncate() needs a running episode: call reset(seed) first, and not after it ended")
        self.done = True
        episode.ended_by = "max_steps"
        graded = self.grade()
        info: dict[str, Any] = {
            "steps": episode.steps, "new_messages": [], "truncated_by": "caller", "reward_components": graded["components"],
            "reward_detail": graded, "ended_by": episode.ended_by, "messages": list(episode.messages),
        }
        if self.env_errors:
            info["env_errors"] = list(self.env_errors)
        return StepResult("", graded["total"], False, True, info)

    def close(self) -> None:
        """Nothing to release in process; the sandboxed runner's close stops its worker."""

    # --- internals ----------------------------------------------------------------------------
    def _execute(self, call: ParsedCall, episode: Episode) -> tuple[str, bool]:
        """Run one tool call; returns (observation text, whether it ends the episode)."""

        def refuse(message: str, exception: str = "ToolError") -> tuple[str, bool]:
            episode.tool_log.append(ToolRecord(episode.steps, call.name, call.arguments or {}, False, message))
            return self.env.error_message(message, exception), False

        if call.error:
            return refuse(call.error)
        validator = self._validators.get(call.name)
        method = self.env.tool_method(call.name)
        if validator is None or method is None:
            known = ", ".join(self._validators)
            return refuse(f"Tool '{call.name}' not found. Available tools: {known}")
        problems = sorted(validator.iter_errors(call.arguments), key=lambda e: list(e.absolute_path))
        if problems:
            first = problems[0]
            where = ".".join(str(p) for p in first.absolute_path) or "arguments"
            return refuse(f"Invalid arguments for {call.name}: {where}: {first.message}")
        arguments = dict(call.arguments or {})
        unexpected = sorted(set(arguments) - self._accepted[call.name]) if self._accepted[call.name] is not None else []
        if unexpected:
            return refuse(f"Invalid arguments for {call.name}: unexpected argument {unexpected[0]!r}", "TypeError")
        try:
            result = method(episode.state, **arguments)
        except ToolError as exc:
            return refuse(str(exc), exc.exception)
        except TypeError as exc:  # arguments the schema allows but the method does not take
            self.env_errors.append({"where": f"tool:{call.name}", "error": _describe(exc)})
            return refuse(f"Invalid arguments for {call.name}: {exc}")
        except Exception as exc:
            self.env_errors.append({"where": f"tool:{call.name}", "error": _describe(exc)})
            return refuse(f"Internal error in {call.name}")
        ends = isinstance(result, EndEpisode)  # the tool decided that this outcome ends the episode
        if ends:
            result = result.result
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
        if len(text) > MAX_TOOL_RESULT_CHARS:
            text = text[:MAX_TOOL_RESULT_CHARS] + f"... [truncated {len(text) - MAX_TOOL_RESULT_CHARS} chars]"
        episode.tool_log.append(ToolRecord(episode.steps, call.name, arguments, True, text))
        return text, ends or call.name in self.env.terminal_tools

    def _user_turn(self, episode: Episode, agent_text: str) -> tuple[str, bool]:
        try:
            reply = self.env.user_reply(episode, agent_text)
            episode.user_turns += 1
            return str(reply.text), bool(reply.done)
        except Exception as exc:
            self.env_errors.append({"where": "user_reply", "error": _describe(exc)})
            episode.ended_by = "env_error"
            return "[the simulated user failed; the episode ends]", True

    def grade(self) -> dict[str, Any]:
        """Evaluate the current episode. A raw number from ``evaluate`` is reported as is, unclamped."""
        assert self.episode is not None
        try:
            result = self.env.evaluate(self.episode)
        except Exception as exc:
            self.env_errors.append({"where": "evaluate", "error": _describe(exc)})
            return {"total": 0.0, "components": {}, "gates": {}, "weights": {}, "notes": {"error": _describe(exc)}}
        if isinstance(result, Reward):
            return result.to_dict()
        try:
            total = float(result)
        except (TypeError, ValueError):
            self.env_errors.append({"where": "evaluate", "error": f"returned {type(result).__name__}, not sdk.Reward"})
            return {"total": 0.0, "components": {}, "gates": {}, "weights": {}, "notes": {}}
        return {"total": total, "components": {"total": total}, "gates": {}, "weights": {}, "notes": {}}


def run_episode(
    env: TaskEnv, seed: int, turns: list[Turn | dict[str, Any] | str], scenario: Scenario | None = None
) -> dict[str, Any]:
    """Play a fixed list of agent turns from ``reset(seed)``; stops early if the episode ends.

    When the turns run out first, the episode is graded as it stands (an agent that stopped talking).
    """
    runner = EpisodeRunner(env)
    first = runner.reset(seed, scenario)
    last: StepResult | None = None
    for turn in turns:
        last = runner.step(turn)
        if last.terminated or last.truncated:
            break
    ended_by: str | None
    if last is None or not (last.terminated or last.truncated):
        graded = runner.truncate().info["reward_detail"]  # as training grades a capped episode
        ended_by = "actions_exhausted"
    else:
        graded = last.info["reward_detail"]
        ended_by = runner.episode.ended_by if runner.episode is not None else None
    assert runner.episode is not None
    return {
        "seed": seed,
        "scenario_hash": first.info["scenario_hash"],
        "reward": graded["total"],
        "reward_detail": graded,
        "steps": runner.episode.steps,
        "ended_by": ended_by,
        "messages": runner.episode.messages,
        "env_errors": list(runner.env_errors),
    }
