"""What a sandboxed env worker (``trace_env.handler``) may answer, checked on the host before anything uses it.

The worker runs untrusted env code, so its replies are validated by shape: a reward is a finite float (not
a string, a dict or NaN), lists are lists, flags are booleans, sizes are bounded. A reply that does not fit
fails the call that asked for it with :class:`sandbox.WorkerBadReply` and a message naming the field, and so
fails the gate check or the env step that made the call - never a traceback further on.

Bounds are generous for honest envs (episodes of hundreds of steps, thousands of tools' worth of schema)
and exist so that one reply cannot make the host do unbounded work.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Optional, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, field_validator

from schemas.errors import validation_message
from schemas.messages import Message

FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Name = Annotated[StrictStr, Field(max_length=256)]
Text = Annotated[StrictStr, Field(max_length=4_000_000)]
MAX_ITEMS = 10_000


def _message(value: dict[str, Any]) -> dict[str, Any]:
    return Message.model_validate(value).model_dump(exclude_none=True)


WireMessage = Annotated[dict[str, Any], AfterValidator(_message)]
"""An OpenAI-format message (``schemas.messages.Message``), kept as the plain dict chat templates read."""


class _Reply(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=False)


class Signature(BaseModel):
    """The parameters of one tool method (an env with a tool domain of its own declares its schemas)."""

    names: list[Name] = Field(max_length=1000)
    required: list[Name] = Field(max_length=1000)
    extra: StrictBool = False


class LoadReply(_Reply):
    """``load``: what the env declares. Missing members stay None so the interface check can name them."""

    capability: Optional[Name] = None
    target: Optional[Name] = None
    description: Optional[Text] = None
    tool_names: Optional[list[Name]] = Field(None, max_length=1000)
    tools: Optional[list[dict[str, Any]]] = Field(None, max_length=1000)
    max_steps: Optional[StrictInt] = None
    write_tools: list[Name] = Field(default_factory=list, max_length=1000)
    terminal_tools: list[Name] = Field(default_factory=list, max_length=1000)
    reward_range: Union[Annotated[list[FiniteFloat], Field(min_length=2, max_length=2)], Annotated[StrictStr, Field(max_length=300)], None] = None
    tool_domain: Optional[Name] = None
    signatures: Optional[dict[Name, Optional[Signature]]] = Field(None, max_length=1000)


class GenerateReply(_Reply):
    fingerprint: Name
    truth: Any = None
    meta: Any = None


class EnvErrorItem(BaseModel):
    where: Annotated[StrictStr, Field(max_length=1000)]
    error: Annotated[StrictStr, Field(max_length=10_000)]


class EpisodeReply(_Reply):
    seed: StrictInt
    scenario_hash: Name
    reward: FiniteFloat
    reward_detail: dict[str, Any]
    steps: Annotated[StrictInt, Field(ge=0)]
    ended_by: Optional[Name] = None
    messages: Optional[list[dict[str, Any]]] = Field(None, max_length=MAX_ITEMS)
    env_errors: list[EnvErrorItem] = Field(max_length=MAX_ITEMS)


class StepInfo(_Reply):
    """The part of a ``reset``/``step`` reply's ``info`` the host relies on (the trainer above all): messages in
    the OpenAI format, checked here once per step and reused (``CheckedInfo.checked``), never checked again.
    Other keys pass through unchecked, as before."""

    messages: list[WireMessage] = Field(default_factory=list, max_length=MAX_ITEMS)
    new_messages: list[WireMessage] = Field(default_factory=list, max_length=MAX_ITEMS)
    assistant_message: Optional[WireMessage] = None
    tools: list[dict[str, Any]] = Field(default_factory=list, max_length=1000)
    reward_components: dict[str, float] = Field(default_factory=dict)
    ended_by: Optional[str] = None
    scenario_hash: Optional[str] = None
    max_steps: Optional[int] = None
    capability: Optional[str] = None
    target: Optional[str] = None
    reward_range: Optional[tuple[float, float]] = None

    @field_validator("reward_range")
    @classmethod
    def _range(cls, value: Optional[tuple[float, float]]) -> Optional[tuple[float, float]]:
        if value is not None and not (math.isfinite(value[0]) and math.isfinite(value[1]) and value[0] < value[1]):
            raise ValueError("reward_range must be two finite numbers, lowest first")
        return value


class CheckedInfo(dict):  # type: ignore[type-arg]
    """A step's ``info`` as the env sent it (a plain dict to every Gymnasium caller), carrying ``checked``: its
    :class:`StepInfo`, validated at the wall. The trainer reuses ``checked`` instead of validating again."""

    __slots__ = ("checked",)

    def __init__(self, data: dict[str, Any], checked: StepInfo) -> None:
        super().__init__(data)
        self.checked = checked


class StepReply(_Reply):
    """``reset`` and ``step``: the fields of :class:`trace_env.engine.StepResult`."""

    observation: Text
    reward: FiniteFloat
    terminated: StrictBool
    truncated: StrictBool
    info: StepInfo


class SolutionReply(BaseModel):
    turns: list[Any] = Field(max_length=MAX_ITEMS)


#: Method -> the model its result must fit. Methods not named here get the generic checks only
#: (JSON, bounded depth and size, clean strings: done by the worker client for every reply).
REPLY_MODELS: dict[str, type[BaseModel]] = {
    "load": LoadReply,
    "generate": GenerateReply,
    "episode": EpisodeReply,
    "reset": StepReply,
    "step": StepReply,
    "truncate": StepReply,
    "solution": SolutionReply,
}


class MalformedReply(ValueError):
    """The reply did not fit its model; ``str()`` is one line naming the field and the problem."""


def check_reply(method: str, result: Any) -> Any:
    """``result`` validated for ``method`` and returned as plain data (exactly the fields that were sent)."""
    model = REPLY_MODELS.get(method)
    if model is None:
        return result
    wrapped = {"turns": result} if model is SolutionReply else result
    if not isinstance(wrapped, dict):
        raise MalformedReply(f"the reply to {method!r} must be an object, got {_kind(result)}")
    try:
        value = model.model_validate(wrapped)
    except ValidationError as exc:
        raise MalformedReply(f"the reply to {method!r} is malformed: {validation_message(exc, limit=3)}") from None
    if isinstance(value, StepReply):  # the info as sent, with its checked part for the trainer
        data = value.model_dump(exclude_unset=True, exclude={"info"})
        data["info"] = CheckedInfo(wrapped["info"], value.info)
        return data
    data = value.model_dump(exclude_unset=True)
    return data["turns"] if model is SolutionReply else data


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
