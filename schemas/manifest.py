"""The manifest stored beside every registered env: what it is, where it came from, whether it passed the gate."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, Field

from schemas.names import CAPABILITY_PATTERN
from schemas.tools import ToolSchema


class Provenance(BaseModel):
    generator: Literal["blueprint", "llm", "file", "manual"] = "blueprint"
    model: str | None = None
    prompt_hash: str | None = None
    attempts: int = Field(default=1, ge=1)
    blueprint: str | None = Field(default=None, description="name of the built-in blueprint, when generator is 'blueprint'")
    file: str | None = Field(default=None, description="absolute path of the user's module, when generator is 'file'")


class EnvManifest(BaseModel):
    """Describes one stored version of an env. ``content_hash`` seals the source and this manifest."""

    capability: str = Field(pattern=CAPABILITY_PATTERN)
    target: str
    version: int = Field(ge=0)
    description: str = ""
    max_steps: int = Field(ge=1)
    tools: list[ToolSchema]
    source_file: str = Field(default="env.py", pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}\.py$", description="a plain file name in the version folder")
    source_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    provenance: Provenance = Field(default_factory=Provenance)
    validation: Literal["unvalidated", "passed", "failed"] = "unvalidated"
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    content_hash: str = Field(default="", description="sha256 over source and manifest (this field blank); set by the registry")

    @property
    def gym_id(self) -> str:
        return f"trace/{self.capability}-v{self.version}"
