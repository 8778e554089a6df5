"""The env SDK: the one import a generated env module may make besides the pure stdlib.

An env module defines a subclass of :class:`TaskEnv` (and may name it ``ENV``). The SDK owns everything
that must be identical across envs (tool-call plumbing, argument validation, transcripts, reward
aggregation), so an env author - human or LLM - only writes the domain: a seeded scenario generator,
tools over the scenario's state, a deterministic simulated user, a graded reward and two solutions.

The SDK is plain stdlib (target profiles come from ``trace_env.targets`` as JSON), so it loads fast inside
a sandbox worker. Env modules import it as ``from trace_env import sdk``; ``from env_registry import sdk``, the
spelling of earlier releases, names the same module.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Sequence

__all__ = [
    "Call",
    "EndEpisode",
    "Episode",
    "Reward",
    "Scenario",
    "ScriptedUser",
    "TaskEnv",
    "ToolError",
    "ToolRecord",
    "Turn",
    "UserReply",
    "call",
    "calls",
    "canonical_json",
    "negated",
    "numbers_in",
    "say",
    "tool",
]


def canonical_json(value: Any) -> str:
    """One spelling per value (sorted keys, no spaces), so hashes of equal scenarios are equal."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


#: Set by the gate's probe (trace_env.gate_probe.truth_order) while it replays ``generate``, None otherwise:
#: called with the scenario each time its truth is set, so the gate sees records changed after that.
_truth_watch: Callable[[Scenario], None] | None = None


@dataclass
class Scenario:
    """One seeded task instance. Everything in it must be JSON-serialisable.

    ``state`` is the initial database the tools act on; ``user`` is what the simulated user wants and
    knows; ``truth`` is the ground truth ``evaluate`` grades against (never shown to the agent).
    """

    seed: int
    state: dict[str, Any]
    user: dict[str, Any]
    truth: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name == "truth" and _truth_watch is not None:  # only while the gate's probe replays generate
            _truth_watch(self)

    def fingerprint(self) -> str:
        """Content hash of the scenario, seed excluded: two seeds giving the same task hash equal. (The handler
        hands a scenario it parsed from its cache the hash of that text, worked out once per seed.)"""
        known = self.__dict__.get("_known_fingerprint")
        if known is not None:
            return str(known)
        body = {"state": self.state, "user": self.user, "truth": self.truth, "meta": self.meta}
        return hashlib.sha256(canonical_json(body).encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "state": self.state, "user": self.user, "truth": self.truth, "meta": self.meta}


class ToolError(Exception):
    """Raise inside a tool to return an error observation in the target's style (never a crash).

    ``exception`` names the error the real target would raise (ToolSandbox shows e.g.
    ``PermissionError: ...``); targets whose style has no ``{exception}`` ignore it.
    """

    def __init__(self, message: str, exception: str = "ToolError") -> None:
        super().__init__(message)
        self.exception = exception


@dataclass
class Call:
    """One tool call an agent makes; ``arguments`` is a dict (the SDK serialises it)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class Turn:
    """One agent action: text for the user, tool calls, or both. Solutions are lists of turns."""

    content: str | None = None
    tool_calls: list[Call] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The wire form that crosses the sandbox boundary and is stored in counterexamples."""
        return {"content": self.content, "calls": [{"name": c.name, "arguments": c.arguments} for c in self.tool_calls]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Turn":
        return cls(content=data.get("content"), tool_calls=[Call(c["name"], c.get("arguments", {})) for c in data["calls"]])

    def to_message(self) -> dict[str, Any]:
        """The turn as an OpenAI assistant message (what the Gymnasium env accepts as an action)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in self.tool_calls
            ]
        return message


def call(name: str, /, **arguments: Any) -> Turn:
    """A turn with a single tool call: ``call("get_user_details", user_id="mia_li_3668")``."""
    return Turn(tool_calls=[Call(name, arguments)])


def calls(*pairs: tuple[str, dict[str, Any]]) -> Turn:
    """A turn with several parallel tool calls."""
    return Turn(tool_calls=[Call(name, dict(arguments)) for name, arguments in pairs])


def say(text: str) -> Turn:
    """A turn with text for the user and no tool call."""
    return Turn(content=text)


@dataclass
class EndEpisode:
    """Return ``sdk.EndEpisode(result)`` from a tool to end the episode on this call's outcome (a submitted
    answer, a checkout that went through): ``result`` is the observation, as a plain return would be. Unlike
    ``terminal_tools`` (every successful call ends it), the tool decides per call."""

    result: Any


@dataclass
class UserReply:
    """What the simulated user says next; ``done`` ends the episode."""

    text: str
    done: bool = False


@dataclass
class ToolRecord:
    """One executed tool call, as the reward sees it."""

    step: int
    name: str
    arguments: dict[str, Any]
    ok: bool
    result: str


_NUMBER = re.compile(r"(?<![\w.])[-+]?\$?\s?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?")


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text`` ("$1,204.50" -> 1204.5), so rewards can check stated amounts."""
    found = []
    for match in _NUMBER.finditer(text or ""):
        whole, fraction = match.group(1).replace(",", ""), match.group(2) or ""
        try:
            found.append(float(whole + fraction))
        except ValueError:  # pragma: no cover - the regex only admits digits
            continue
    return found


_NEGATION = re.compile(
    r"(?:not|no|never|cannot|can't|won't|isn't|aren't|wasn't|weren't|don't|doesn't|didn't|hasn't|haven't|hadn't|"
    r"shouldn't|couldn't|wouldn't|unable|without|neither|nor)"
)
_CLAUSE = re.compile(r"[.!?;:\n]|\bbut\b|\bso\b|\band\b")


def negated(text: str, start: int, window: int = 4) -> bool:
    """Whether one of the ``window`` words before position ``start`` of ``text``, in the same clause, is a
    negation ("is not cancelled", "can't be refunded", "isn't Thursday"): a mention after it does not state
    the thing it names."""
    head = _CLAUSE.split(text[:start])[-1]
    words = [w.strip(",'\"()[]").lower().replace("\u2019", "'") for w in head.split()[-window:]]
    return any(_NEGATION.fullmatch(w) for w in words)


@dataclass
class Episode:
    """The live episode handed to the user simulator and to ``evaluate``: state, transcript, tool log."""

    scenario: Scenario
    state: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    tool_log: list[ToolRecord] = field(default_factory=list)
    steps: int = 0
    user_turns: int = 0
    ended_by: str | None = None

    # --- what the agent did -------------------------------------------------------------------
    def calls(self, name: str | None = None, ok: bool | None = None) -> list[ToolRecord]:
        """Executed tool calls, optionally only those of one tool / only (un)successful ones."""
        return [r for r in self.tool_log if (name is None or r.name == name) and (ok is None or r.ok == ok)]

    def called(self, name: str, ok: bool | None = True, **arguments: Any) -> bool:
        """Whether ``name`` was called with (at least) these argument values."""
        return any(all(r.arguments.get(k) == v for k, v in arguments.items()) for r in self.calls(name, ok))

    def first_index(self, name: str, ok: bool | None = True, **arguments: Any) -> int | None:
        """Position in the tool log of the first matching call, to check that a read came before a write."""
        for index, record in enumerate(self.tool_log):
            if record.name == name and (ok is None or record.ok == ok):
                if all(record.arguments.get(k) == v for k, v in arguments.items()):
                    return index
        return None

    def write_calls(self, write_tools: Iterable[str]) -> list[ToolRecord]:
        names = set(write_tools)
        return [r for r in self.tool_log if r.name in names and r.ok]

    # --- what the agent said ------------------------------------------------------------------
    def assistant_texts(self, after_step: int = 0) -> list[str]:
        """Texts the agent wrote, optionally only those of steps after ``after_step`` (one assistant message per step)."""
        turns = [m for m in self.messages if m.get("role") == "assistant"]
        return [m.get("content") or "" for m in turns[after_step:] if m.get("content")]

    @property
    def assistant_text(self) -> str:
        return "\n".join(self.assistant_texts())

    def said(self, value: Any, tolerance: float = 0.005, after_step: int = 0) -> bool:
        """Whether the agent told the user ``value`` (after step ``after_step``): numbers compare numerically,
        text case-insensitively as whole words, and a mention right after a negation ("is not cancelled")
        does not count: it does not tell the user the thing."""
        text = "\n".join(self.assistant_texts(after_step))
        if isinstance(value, bool):
            value = str(value).lower()
        if isinstance(value, (int, float)):
            return any(math.isclose(n, float(value), abs_tol=tolerance) for n in numbers_in(text))
        wanted = str(value).lower()
        if not wanted:
            return False
        low = text.lower()
        edge = (r"\b" if wanted[:1].isalnum() else ""), (r"\b" if wanted[-1:].isalnum() else "")
        pattern = re.compile(edge[0] + re.escape(wanted) + edge[1])
        return any(not negated(low, match.start()) for match in pattern.finditer(low))


@dataclass
class Reward:
    """A graded reward: named components in [0, 1] combined by weights into ``total``.

    Several components give GRPO groups variance: partial progress scores between 0 and 1. A ``gate``
    component multiplies instead of averaging - a forbidden action zeroes the reward however good the rest.
    """

    components: dict[str, float]
    weights: dict[str, float] = field(default_factory=dict)
    gates: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> float:
        if not self.components and not self.gates:
            return 0.0
        weighted = 0.0
        weight_sum = 0.0
        for name, score in self.components.items():
            weight = float(self.weights.get(name, 1.0))
            weighted += weight * _clamp(score)
            weight_sum += weight
        base = weighted / weight_sum if weight_sum > 0 else 1.0
        for score in self.gates.values():
            base *= _clamp(score)
        return _clamp(base)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "components": {k: _clamp(v) for k, v in self.components.items()},
            "gates": {k: _clamp(v) for k, v in self.gates.items()},
            "weights": dict(self.weights),
            "notes": dict(self.notes),
        }


def _clamp(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    if math.isnan(number):
        return 0.0
    return min(1.0, max(0.0, number))


_REQUEST = re.compile(
    r"\?|\b(please (?:provide|share|give|tell|confirm)|could you|can you|what is|what's|tell me|let me know|i need your)\b",
    re.IGNORECASE,
)
_CONFIRM_QUESTION = re.compile(
    r"\b(confirm|proceed|go ahead|shall i|should i|would you like me to|do you want me to|is that (?:ok|okay|correct|right)|"
    r"can i go ahead|may i)\b",
    re.IGNORECASE,
)


@dataclass
class ScriptedUser:
    """A deterministic user that answers from scenario facts.

    ``facts`` maps trigger words to an answer: when the agent asks something (a question mark or a request
    such as "could you") and its message contains a trigger, the user gives that answer (each fact at most
    ``repeat`` times), so a final answer that merely mentions a trigger word still closes the conversation. A confirmation question gets ``confirm_reply``.
    Anything else is taken as the agent's final answer and the user closes the conversation.
    """

    facts: list[tuple[tuple[str, ...], str]] = field(default_factory=list)
    confirm_reply: str = "Yes, please go ahead."
    closing: str = "Thanks, that's all I needed."
    max_turns: int = 8
    repeat: int = 2

    def reply(self, episode: Episode, agent_text: str) -> UserReply:
        if episode.user_turns >= self.max_turns:
            return UserReply(self.closing, done=True)
        text = (agent_text or "").lower()
        if not text.strip():
            return UserReply("Sorry, I did not get any answer. Could you help me with my request?")
        given = [m.get("content") or "" for m in episode.messages if m.get("role") == "user"]
        confirming = bool(_CONFIRM_QUESTION.search(text))
        if _REQUEST.search(text):
            matched = [answer for triggers, answer in self.facts if any(t.lower() in text for t in triggers)]
            fresh = [answer for answer in matched if not any(answer in g for g in given)]
            if fresh:  # answer everything asked for at once, as a person would
                return UserReply(" ".join(dict.fromkeys(fresh)))
            repeatable = [a for a in matched if sum(a in g for g in given) < self.repeat]
            if repeatable and not confirming:  # asked again for a fact already given: repeat it
                return UserReply(repeatable[0])
        if confirming:
            return UserReply(self.confirm_reply)
        return UserReply(self.closing, done=True)


_TOOL_ATTR = "__trace_tool_name__"


def tool(name_or_function: str | Callable[..., Any] | None = None) -> Any:
    """Mark a :class:`TaskEnv` method as the implementation of a target tool.

    ``@tool`` uses the method's name; ``@tool("get_user_details")`` names it explicitly. The method is
    called as ``method(state, **arguments)`` with arguments already validated against the tool's schema,
    and returns a string or any JSON-serialisable value. The state is passed positionally: when a tool has
    a parameter literally named ``state`` (e.g. a US state code), name the first parameter ``db`` instead.
    """

    def mark(function: Callable[..., Any], name: str | None) -> Callable[..., Any]:
        setattr(function, _TOOL_ATTR, name or function.__name__)
        return function

    if callable(name_or_function):
        return mark(name_or_function, None)
    return lambda function: mark(function, name_or_function)


class TaskEnv:
    """Base class of every env module's environment. Subclasses fill in the domain; see module docs.

    Class attributes:
        capability: snake_case name of the capability the env trains.
        target: id of the target profile whose tools the env exposes.
        tool_names: which of the target's tools the agent gets, in order.
        max_steps: agent turns before the episode is truncated.
        terminal_tools: tools whose successful call ends the episode (e.g. a hand-off to a human).
        write_tools: tools that change state (used by rewards and by validation probes).
        reward_range: the lowest and highest reward ``evaluate`` can give (default ``(0.0, 1.0)``; a
            ``[-1, 1]`` reward returns a float from ``evaluate``). The gate and the trainer judge rewards on it.
        tool_domain: empty for an env on its target's tools; a name (``"library_desk"``) for an env that
            trains a capability on tools of its own, declared in ``tool_schemas`` (OpenAI format). The gate
            then checks those schemas against the tool methods' signatures and reports the env off-target.
    """

    capability: ClassVar[str] = ""
    target: ClassVar[str] = ""
    description: ClassVar[str] = ""
    tool_names: ClassVar[Sequence[str]] = ()  # immutable: a list here would be state every env shares
    max_steps: ClassVar[int] = 30
    terminal_tools: ClassVar[frozenset[str]] = frozenset()
    write_tools: ClassVar[frozenset[str]] = frozenset()
    reward_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    tool_domain: ClassVar[str] = ""
    tool_schemas: ClassVar[Sequence[dict[str, Any]]] = ()

    _tool_methods: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        methods: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            for attribute, value in vars(klass).items():
                tool_name = getattr(value, _TOOL_ATTR, None)
                if tool_name:
                    methods[tool_name] = attribute
        cls._tool_methods = methods

    # --- the interface -------------------------------------------------------------------------
    def tools(self) -> list[dict[str, Any]]:
        """OpenAI-format schemas of the exposed tools: the target profile's, unchanged, or for an env with a
        ``tool_domain`` of its own, its ``tool_schemas`` (those named in ``tool_names``, in that order)."""
        if self.tool_domain:
            declared = {str(s.get("function", {}).get("name")): s for s in self.tool_schemas if isinstance(s, dict)}
            missing = [name for name in self.tool_names if name not in declared]
            if missing:
                raise KeyError(f"tool_schemas declares no schema for {', '.join(missing)}")
            return [json.loads(json.dumps(declared[name])) for name in self.tool_names]
        from trace_env import targets

        return [targets.tool_schema(self.target, name) for name in self.tool_names]

    def error_message(self, message: str, exception: str = "ToolError") -> str:
        """Word a failed call the way the target does, so the agent sees the real target's errors."""
        from trace_env import targets

        try:
            if self.tool_domain:
                raise KeyError(self.tool_domain)
            style = targets.error_style(self.target)
        except KeyError:
            style = "Error: {message}"
        return style.replace("{message}", message).replace("{exception}", exception)

    def target_policy(self) -> str:
        """The target profile's policy summary, for system prompts that carry the domain rules."""
        from trace_env import targets

        try:
            return targets.policy(self.target)
        except KeyError:  # an env on a tool domain of its own states its rules in its system prompt
            return ""

    def rng(self, seed: int) -> random.Random:
        """The only source of randomness an env may use: seeded, so scenarios replay exactly."""
        return random.Random(f"{self.capability}:{seed}")

    def generate(self, seed: int) -> Scenario:
        raise NotImplementedError

    def system_prompt(self, scenario: Scenario) -> str:
        raise NotImplementedError

    def first_user_message(self, scenario: Scenario) -> str:
        raise NotImplementedError

    def user_reply(self, episode: Episode, agent_text: str) -> UserReply:
        """Default: a :class:`ScriptedUser` over ``scenario.user['facts']`` (list of [triggers, answer])."""
        facts = [(tuple(triggers), answer) for triggers, answer in episode.scenario.user.get("facts", [])]
        return ScriptedUser(facts=facts).reply(episode, agent_text)

    def evaluate(self, episode: Episode) -> Reward:
        raise NotImplementedError

    def derive_truth(self, scenario: Scenario, state: dict[str, Any]) -> dict[str, Any] | None:
        """Optional: the ground truth recomputed from ``state``, as ``generate`` concludes it from the state
        it builds (write ``generate`` to call this). When an env defines it, the gate recomputes the truth from
        the state the reference's reads left behind and requires it to equal ``scenario.truth``: a truth that
        goes stale between generation and grading makes the right answer lose. Default: not declared."""
        return None

    def reference_solution(self, scenario: Scenario) -> list[Turn]:
        raise NotImplementedError

    def capability_skipping_solution(self, scenario: Scenario) -> list[Turn]:
        raise NotImplementedError

    # --- used by the runner --------------------------------------------------------------------
    def tool_method(self, name: str) -> Callable[..., Any] | None:
        attribute = self._tool_methods.get(name)
        return getattr(self, attribute) if attribute else None

    def initial_state(self, scenario: Scenario) -> dict[str, Any]:
        """A private copy of the scenario's state, so an episode never edits the scenario itself (a JSON round
        trip where the state is plain JSON, as it always is inside the sandbox: several times faster than
        ``deepcopy`` on big states)."""
        parse_again = scenario.__dict__.get("_state_again")  # set by the handler: the cached JSON, parsed anew
        if parse_again is not None:
            return parse_again()
        try:
            text = json.dumps(scenario.state)
        except (TypeError, ValueError):
            return copy.deepcopy(scenario.state)
        copied = json.loads(text)
        return copied if copied == scenario.state else copy.deepcopy(scenario.state)
