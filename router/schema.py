"""The router's boundary objects: the menu it reads, the knobs it takes and the decision it returns.

A menu is model-independent (demos are stored as chat messages, rendered with whichever tokenizer routes),
so ``factory route --save-menu`` can write it once and ``factory eval`` / ``factory run`` can reuse it
without starting a sandbox again.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from schemas.messages import Message
from schemas.names import CAPABILITY_PATTERN  # the one rule (router.loading imports it from here)

NO_ADAPTER = "(base)"
"""Key of the "no adapter" option in probabilities, weights and confusion matrices. Capability names
match ``^[a-z][a-z0-9_]{1,63}$``, so this key can never collide with one."""

DEFAULT_INSTRUCTION = (
    "You route a customer-service task to the one specialised skill that best fits it. Each skill below has "
    "a label, a description and an example of a task it solved."
)
DEFAULT_NONE_DESCRIPTION = "None of the skills above fits this task: answer it with the general model."


class DemoTrajectory(BaseModel):
    """One successful episode of a capability's synthetic env: its reference solution, played in a sandbox."""

    gym_id: str
    seed: int
    reward: float
    messages: list[Message] = Field(min_length=1)
    tools: list[dict[str, Any]] = Field(default_factory=list, description="OpenAI tool schemas of the env")


class MenuOption(BaseModel):
    """One capability the router can choose: its adapter (when known) and what the prompt shows about it."""

    capability: str = Field(pattern=CAPABILITY_PATTERN)
    description: str = Field(min_length=1)
    adapter: str | None = Field(default=None, description="PEFT adapter folder for this capability")
    demo: DemoTrajectory


class RoutingMenu(BaseModel):
    """The capabilities on offer, in canonical order; the "no adapter" option is implicit and comes last."""

    schema_version: int = 1
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    options: list[MenuOption] = Field(min_length=1)
    notes: list[str] = Field(default_factory=list)

    @field_validator("options")
    @classmethod
    def _unique(cls, options: list[MenuOption]) -> list[MenuOption]:
        names = [o.capability for o in options]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"capabilities listed twice: {', '.join(duplicates)}")
        return options

    @property
    def capabilities(self) -> list[str]:
        return [o.capability for o in self.options]

    @property
    def keys(self) -> list[str]:
        """Option keys in canonical order: the capabilities, then :data:`NO_ADAPTER`."""
        return self.capabilities + [NO_ADAPTER]

    def option(self, capability: str) -> MenuOption:
        for option in self.options:
            if option.capability == capability:
                return option
        raise KeyError(capability)

    def adapters(self) -> dict[str, str]:
        """Adapter folder per capability, for those that have one."""
        return {o.capability: o.adapter for o in self.options if o.adapter}


class RouterConfig(BaseModel):
    """How the router builds its prompt and decides. Defaults follow the paper (one fixed label order, hard
    choice); ``debias`` and ``soft`` are the additions beyond it."""

    alphabet: list[str] = Field(
        default_factory=lambda: list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
        min_length=2,
        description="labels, in order; the first len(menu)+1 are used and each must be one token",
    )
    debias: Literal["none", "cyclic"] = Field(
        default="none",
        description="cyclic: score the menu under cyclic rotations of its options (each option takes every "
        "label and position once) and average the probabilities per option",
    )
    orders: int | None = Field(default=None, ge=1, description="rotations to score with debias=cyclic (default: all)")
    soft: bool = Field(default=False, description="mix the top adapters by probability instead of picking one")
    top_p: float = Field(default=0.9, gt=0.0, le=1.0, description="soft mode: nucleus mass of adapters kept")
    max_adapters: int | None = Field(default=None, ge=1, description="soft mode: at most this many adapters")
    include_system: bool = Field(
        default=False,
        description="show system prompts of the task and the demos (a target's policy is the same for all of its "
        "tasks, so it carries no routing signal and costs most of the tokens)",
    )
    include_tools: bool = Field(default=False, description="render the demos' tool schemas through the chat template")
    max_demo_chars: int = Field(default=6000, ge=200, description="longer rendered demos are cut, marked '[...]'")
    max_observation_chars: int = Field(default=8000, ge=200)
    prefix_cache: bool = Field(default=True, description="reuse the menu's key/value cache across tasks")
    instruction: str = DEFAULT_INSTRUCTION
    none_description: str = DEFAULT_NONE_DESCRIPTION

    @field_validator("alphabet")
    @classmethod
    def _distinct(cls, alphabet: list[str]) -> list[str]:
        if len(set(alphabet)) != len(alphabet):
            raise ValueError("labels in the alphabet must be distinct")
        if any(not label or label != label.strip() for label in alphabet):
            raise ValueError("labels must be non-empty and carry no surrounding whitespace")
        return alphabet


class OrderScore(BaseModel):
    """The label distribution for one arrangement of the menu."""

    order: list[str] = Field(description="option keys in label order")
    labels: list[str]
    probabilities: dict[str, float] = Field(description="per option key, softmax over the label tokens only")


class RouteDecision(BaseModel):
    """Which adapter(s) a task gets, and why: probabilities per option, averaged over the scored orders."""

    task_id: str | None = None
    choice: str | None = Field(description="the capability whose adapter to apply; None means the base model")
    label: str = Field(description="the label the choice had in the menu's canonical order")
    probabilities: dict[str, float]
    weights: dict[str, float] = Field(
        default_factory=dict, description="adapters to apply and their weights: {} base, {c: 1.0} hard, several soft"
    )
    mode: Literal["hard", "soft"] = "hard"
    debiased: bool = False
    orders: list[OrderScore] = Field(default_factory=list)
    prompt_tokens: int = 0
    seconds: float = 0.0

    @model_validator(mode="after")
    def _consistent(self) -> "RouteDecision":
        if self.choice is None and self.weights:
            raise ValueError("a base-model decision applies no adapter weights")
        if self.choice is not None and self.choice not in self.weights:
            raise ValueError("the chosen capability must carry a weight")
        return self

    def top(self, k: int = 2) -> list[tuple[str, float]]:
        """The k most probable options, most probable first (ties in key order)."""
        return sorted(self.probabilities.items(), key=lambda kv: -kv[1])[:k]
