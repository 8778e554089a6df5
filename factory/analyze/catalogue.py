"""The capability catalogue (``catalogue.json``, package data): the six capabilities the TRACE paper found on
τ²-bench plus escalation judgment, and the declared aliases that map other names onto them.

The catalogue is configuration: a new capability, or a new alias, is an edit of ``catalogue.json``, not a
rule's whim. The offline labeler emits only catalogue names: a rule may file its finding under an alias
(``policy_application``: deciding wrongly whether the policy allows a request, which the catalogue counts as
precondition_verification, failing to check what the policy makes an action conditional on) and the label
carries the catalogue name. The catalogue can seed LLM discovery (the model reuses these names for the same
ideas and adds others) or replace it (``--catalogue only``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from schemas.capability import Capability

PAPER_NAMES = (
    "precondition_verification", "structured_data_reasoning", "tool_calling_precision", "multi_step_task_completion",
    "permission_error_recovery", "datetime_reasoning",
)  # fmt: skip


class CatalogueError(ValueError):
    """catalogue.json is malformed or names a capability no rule knows: a packaging error, not user input."""


@lru_cache(maxsize=1)
def _load() -> tuple[tuple[Capability, ...], dict[str, str]]:
    raw = json.loads(resources.files(__package__).joinpath("catalogue.json").read_text(encoding="utf-8"))
    capabilities = tuple(Capability(name=c["name"], description=c["description"]) for c in raw["capabilities"])
    names = {c.name for c in capabilities}
    aliases = {str(k): str(v) for k, v in (raw.get("aliases") or {}).items()}
    bad = {k: v for k, v in aliases.items() if v not in names or k in names}
    if bad or len(names) != len(capabilities):
        raise CatalogueError(f"catalogue.json: aliases must map a non-catalogue name to a catalogue name, and names must be unique: {bad}")
    return capabilities, aliases


BUILTIN_CAPABILITIES: tuple[Capability, ...] = _load()[0]
PAPER_CAPABILITIES: tuple[Capability, ...] = tuple(c for c in BUILTIN_CAPABILITIES if c.name in PAPER_NAMES)
ALIASES: dict[str, str] = dict(_load()[1])


def builtin_capabilities() -> list[Capability]:
    """Fresh copies, so callers may attach example failures without touching the catalogue."""
    return [c.model_copy(deep=True) for c in BUILTIN_CAPABILITIES]


def builtin_names() -> list[str]:
    return [c.name for c in BUILTIN_CAPABILITIES]


def canonical(name: str) -> str:
    """The catalogue name for a name or a declared alias; any other name is returned unchanged (an LLM's
    discovered capability is not the catalogue's to rename)."""
    return ALIASES.get(name, name)
