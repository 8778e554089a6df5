"""What the offline labeler needs to know about a target's tools: read or write, schema, and the record a
write changes. Taken from the shipped target profile when there is one, else guessed from the tool name."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import jsonschema

from schemas.targets import builtin_target_ids, load_target

_READ_PREFIXES = ("get_", "find_", "search_", "list_", "lookup_", "check_", "read_", "fetch_", "query_")
_GENERIC = {"calculate", "think", "transfer_to_human_agents", "respond"}
_TARGET_ALIASES = {
    re.compile(r"^tau(?:2|-bench)-(airline|retail|telecom)$"): "tau2-{0}",
}


class ToolCatalog:
    """Tool kinds and schemas for one target."""

    def __init__(self, kinds: dict[str, str], schemas: dict[str, dict[str, Any]]) -> None:
        self.kinds = kinds
        self.schemas = schemas
        self._validators: dict[str, Any] = {}

    def kind(self, name: str) -> str:
        if name in self.kinds:
            return self.kinds[name]
        if name in _GENERIC:
            return "generic"
        return "read" if name.startswith(_READ_PREFIXES) else "write"

    def is_write(self, name: str) -> bool:
        return self.kind(name) == "write"

    def is_read(self, name: str) -> bool:
        return self.kind(name) == "read"

    def knows(self, name: str) -> bool | None:
        """Whether the tool exists; None when the catalogue has no tool list to say."""
        return (name in self.schemas) if self.schemas else None

    def primary_key(self, name: str, arguments: dict[str, Any]) -> str | None:
        """The argument naming the record a call acts on: the first required ``*_id`` that is not a payment."""
        schema = self.schemas.get(name) or {}
        ordered = list(schema.get("required") or []) + list((schema.get("properties") or {}).keys()) + list(arguments)
        for key in ordered:
            if key.endswith("_id") and "payment" not in key and isinstance(arguments.get(key), str):
                return key
        return None

    def schema_errors(self, name: str, arguments: dict[str, Any]) -> list[str]:
        schema = self.schemas.get(name)
        if not schema:
            return []
        validator = self._validators.get(name)
        if validator is None:
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            validator = self._validators[name] = cls(schema)
        errors = []
        for error in validator.iter_errors(arguments):
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            errors.append(f"{where}: {error.message}")
        return errors


@lru_cache(maxsize=None)
def catalog_for_target(target: str) -> ToolCatalog:
    """The catalogue for a target id (``tau2-airline``; ``tau-bench-retail`` maps to ``tau2-retail``)."""
    profile_id = target
    for pattern, template in _TARGET_ALIASES.items():
        match = pattern.match(target)
        if match:
            profile_id = template.format(*match.groups())
    if profile_id in builtin_target_ids():
        profile = load_target(profile_id)
        kinds = {name: meta.kind for name, meta in profile.tool_meta.items()}
        schemas = {tool.name: tool.function.parameters for tool in profile.tools}
        return ToolCatalog(kinds, schemas)
    return ToolCatalog({}, {})
