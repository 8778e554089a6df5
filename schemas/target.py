"""Target profiles: the real environment a synthetic env must imitate (tools, policy, metadata)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from schemas.tools import ToolSchema


class ToolMeta(BaseModel):
    """What a tool does to state; used to spot unverified writes and to pick read-only probes."""

    kind: Literal["read", "write", "generic"] = "generic"
    mutates_state: bool = False


class TargetProfile(BaseModel):
    """Everything the factory knows about one target: its exact tool interface and its policy, in our words."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]{1,63}$")
    title: str
    family: Literal["tau2", "toolsandbox", "mcp", "custom"] = "custom"
    domain: str = ""
    tools: list[ToolSchema]
    tool_meta: dict[str, ToolMeta] = Field(default_factory=dict)
    policy: str = Field(default="", description="domain rules an agent must follow, summarised in our own words")
    error_style: str = Field(default="Error: {message}", description="how the target words a failed tool call")
    source: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _unique_tool_names(self) -> "TargetProfile":
        names = [tool.name for tool in self.tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"tool names must be unique; repeated: {', '.join(duplicates)}")
        unknown = sorted(set(self.tool_meta) - set(names))
        if unknown:
            raise ValueError(f"tool_meta names tools the profile does not have: {', '.join(unknown)}")
        return self

    def tool(self, name: str) -> ToolSchema:
        for tool in self.tools:
            if tool.name == name:
                return tool
        raise KeyError(f"target {self.id!r} has no tool {name!r}; it has: {', '.join(self.tool_names)}")

    @property
    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.tools]
