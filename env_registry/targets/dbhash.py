"""The τ² database hash, computed from a plain JSON database the way τ²-bench computes it from its models.

τ²-bench hashes ``json.dumps(db.model_dump(), sort_keys=True, default=str)``. Its pydantic models do two
things a raw JSON database does not: they fill optional fields that are absent with ``null``, and they
coerce numbers to the declared field type (a certificate worth ``50`` is stored as ``50.0``, a payment
of ``50.0`` as ``50``). A :class:`DBShape` lists both per domain, as data; :func:`db_hash` applies it
and hashes, so a database held by an MCP server hashes exactly as the same database inside τ²-bench.

Paths are dotted; ``*`` matches every key of an object or every item of a list.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, Field

NumberType = Literal["int", "float"]


class DBShape(BaseModel):
    """What a domain's typed models would do to a raw database before hashing."""

    optional_null: list[str] = Field(default_factory=list, description="paths of optional fields, filled with null when absent")
    numbers: dict[str, NumberType] = Field(default_factory=dict, description="paths of numeric fields and their declared type")


# Read off τ²-bench's domain data models (airline/data_model.py, retail/data_model.py at tau2 1.0.1).
AIRLINE = DBShape(
    optional_null=["reservations.*.status"],
    numbers={
        "users.*.payment_methods.*.amount": "float",
        "reservations.*.payment_history.*.amount": "int",
        "reservations.*.flights.*.price": "int",
        "reservations.*.total_baggages": "int",
        "reservations.*.nonfree_baggages": "int",
        "flights.*.dates.*.prices.*": "int",
        "flights.*.dates.*.available_seats.*": "int",
    },
)
RETAIL = DBShape(
    optional_null=[
        f"orders.*.{name}"
        for name in (
            "cancel_reason",
            "exchange_items",
            "exchange_new_items",
            "exchange_payment_method_id",
            "exchange_price_difference",
            "return_items",
            "return_payment_method_id",
        )
    ],
    numbers={
        "products.*.variants.*.price": "float",
        "users.*.payment_methods.*.balance": "float",
        "orders.*.items.*.price": "float",
        "orders.*.payment_history.*.amount": "float",
        "orders.*.exchange_price_difference": "float",
    },
)
SHAPES: dict[str, DBShape] = {"airline": AIRLINE, "retail": RETAIL}


def _children(node: Any) -> list[tuple[Any, Any]]:
    if isinstance(node, dict):
        return list(node.items())
    if isinstance(node, list):
        return list(enumerate(node))
    return []


def _parents(root: Any, parts: list[str]) -> list[Any]:
    """Every container reached by following ``parts`` (``*`` fans out)."""
    nodes = [root]
    for part in parts:
        following = []
        for node in nodes:
            if part == "*":
                following += [child for _, child in _children(node)]
            elif isinstance(node, dict) and part in node:
                following.append(node[part])
        nodes = following
    return nodes


def _coerce(value: Any, kind: NumberType) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if kind == "float":
        return float(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value  # a fractional value in an int field: τ² would reject it; leave it to differ


def normalise(db: dict[str, Any], shape: DBShape, in_place: bool = False) -> dict[str, Any]:
    """``db`` with absent optional fields set to null and numbers coerced to their declared type.

    A copy unless ``in_place`` (for a database the caller just loaded and owns: a 7 MB copy is not free).
    """
    out = db if in_place else json.loads(json.dumps(db))
    for path in shape.optional_null:
        *head, last = path.split(".")
        for parent in _parents(out, head):
            if isinstance(parent, dict):
                parent.setdefault(last, None)
    for path, kind in shape.numbers.items():
        *head, last = path.split(".")
        for parent in _parents(out, head):
            keys = [k for k, _ in _children(parent)] if last == "*" else ([last] if isinstance(parent, dict) and last in parent else [])
            for key in keys:
                parent[key] = _coerce(parent[key], kind)
    return out


def db_hash(db: dict[str, Any], shape: DBShape | None = None, in_place: bool = False) -> str:
    """τ²'s ``get_db_hash`` of a plain JSON database (after :func:`normalise` when a shape is given)."""
    body = normalise(db, shape, in_place) if shape is not None else db
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
