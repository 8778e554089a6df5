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
"""Tools that neither read nor change the world: τ²'s calculator, τ-bench's ``think``, the transfer."""
_TARGET_ALIASES = {
    re.compile(r"^tau(?:2|-bench)-(airline|retail|telecom)$"): "tau2-{0}",
}


class ToolCatalog:
    """Tool kinds and schemas for one target."""

    def __init__(self, kinds: dict[str, str], schemas: dict[str, dict[str, Any]], names: set[str] | None = None) -> None:
        self.kinds = kinds
        self.schemas = {name: inline_refs(schema) for name, schema in schemas.items()}
        self.names = names if names is not None else (set(schemas) or None)
        self._validators: dict[str, Any] = {}
        self._checked: dict[tuple[str, str], list[str]] = {}

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
        """Whether the run offered the tool; None when there is no tool list to say."""
        return (name in self.names) if self.names else None

    def primary_key(self, name: str, arguments: dict[str, Any]) -> str | None:
        """The argument naming the record a call acts on: the first required ``*_id`` that is not a payment."""
        schema = self.schemas.get(name) or {}
        ordered = list(schema.get("required") or []) + list((schema.get("properties") or {}).keys()) + list(arguments)
        for key in ordered:
            if key.endswith("_id") and "payment" not in key and isinstance(arguments.get(key), str):
                return key
        return None

    def schema_errors(self, name: str, arguments: dict[str, Any], raw: str | None = None) -> list[str]:
        """Schema violations of one call; ``raw`` (the arguments' JSON text) keys a cache, since agents repeat calls."""
        if raw is not None:
            key = (name, raw)
            if key not in self._checked:
                if len(self._checked) > 50_000:
                    self._checked.clear()
                self._checked[key] = self._schema_errors(name, arguments)
            return self._checked[key]
        return self._schema_errors(name, arguments)

    def _schema_errors(self, name: str, arguments: dict[str, Any]) -> list[str]:
        schema = self.schemas.get(name)
        if not schema or (self.names is not None and name not in self.names):
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


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with local ``$ref``s to ``$defs`` replaced by what they point to: validating it then needs no
    reference resolution, which is most of jsonschema's cost on τ²'s tool schemas (they have no cycles)."""
    defs = schema.get("$defs") or schema.get("definitions") or {}

    def walk(node: Any, depth: int = 0) -> Any:
        if depth > 50:
            return node
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")) and ref.rsplit("/", 1)[-1] in defs:
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return walk({**defs[ref.rsplit("/", 1)[-1]], **rest}, depth + 1)
            return {k: walk(v, depth + 1) for k, v in node.items() if k not in ("$defs", "definitions")}
        if isinstance(node, list):
            return [walk(v, depth + 1) for v in node]
        return node

    return walk(schema) if defs else schema


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


def catalog_for(target: str, tools: list[str] | None = None) -> ToolCatalog:
    """The catalogue for a run: the target's schemas, restricted to the tools the run offered when the file
    says which (τ-bench offers ``think`` and lacks τ²'s ``get_flight_status``)."""
    if not tools:
        return catalog_for_target(target)
    return _restricted(target, tuple(sorted(tools)))


@lru_cache(maxsize=64)
def _restricted(target: str, tools: tuple[str, ...]) -> ToolCatalog:
    base = catalog_for_target(target)
    return ToolCatalog(base.kinds, base.schemas, set(tools))
