"""Replay τ² gold actions cheaply on the real databases: copy-on-write tables and an incremental DB hash.

Copying the 7 MB airline database for every task would take most of a test's budget, so a task's database
is a dict of :class:`CopyOnRead` tables: a record is deep-copied the first time a tool reaches it, and the
τ² hash (sha256 of ``json.dumps(db, sort_keys=True, default=str)``) is rebuilt from the initial records'
cached JSON plus the records the task touched.
"""

from __future__ import annotations

import copy
import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from tests.conftest import SHARED_TARGETS

#: Optional fields τ²'s model_dump adds as null when the raw file lacks them.
OPTIONAL_FIELDS = {
    "airline": {"reservations": ("status",)},
    "retail": {"orders": ("cancel_reason", "exchange_items", "exchange_new_items", "exchange_payment_method_id",
                          "exchange_price_difference", "return_items", "return_payment_method_id")},
}


class CopyOnRead(dict):
    """A table whose records are copied on first access, so the shared initial records are never edited."""

    def __init__(self, base: dict[str, Any]) -> None:
        super().__init__()
        self.base = base

    def __getitem__(self, key: str) -> Any:
        if not dict.__contains__(self, key):
            dict.__setitem__(self, key, copy.deepcopy(self.base[key]))
        return dict.__getitem__(self, key)

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self.base

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def keys(self):  # type: ignore[override]
        extra = [key for key in dict.keys(self) if key not in self.base]
        return [*self.base, *extra] if extra else list(self.base)

    def __iter__(self):
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def peek(self, key: str) -> Any:
        """A record without copying it: iteration is for reading (searches, look-ups by name). A tool that
        wrote through it would corrupt the shared records and fail every later task's hash, loudly."""
        return dict.__getitem__(self, key) if dict.__contains__(self, key) else self.base[key]

    def values(self):  # type: ignore[override]
        return (self.peek(key) for key in self.keys())

    def items(self):  # type: ignore[override]
        return ((key, self.peek(key)) for key in self.keys())

    def touched(self) -> dict[str, Any]:
        return dict(dict.items(self))


class Tau2Domain:
    """One domain's initial database (normalised as τ²'s model_dump would) and its per-record JSON."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.folder = SHARED_TARGETS / "tau2" / name
        self.db = json.loads((self.folder / "db.json").read_text())  # raw, as τ² and its servers load it
        self.cached = {table: {key: self.dump(table, record) for key, record in records.items()}
                       for table, records in self.db.items()}

    def dump(self, table: str, record: dict[str, Any]) -> str:
        """A record's JSON as in τ²'s hash: absent optional fields are null there (model_dump)."""
        fields = OPTIONAL_FIELDS[self.name].get(table, ())
        return dump({**{key: None for key in fields}, **record} if fields else record)

    def fresh(self) -> dict[str, CopyOnRead]:
        return {table: CopyOnRead(records) for table, records in self.db.items()}

    def hash(self, db: dict[str, CopyOnRead]) -> str:
        parts = []
        for table in sorted(db):
            touched = db[table].touched()
            rows = [f"{json.dumps(key)}: {self.dump(table, touched[key]) if key in touched else self.cached[table][key]}"
                    for key in sorted(db[table].keys())]
            parts.append(f"{json.dumps(table)}: {{{', '.join(rows)}}}")
        return hashlib.sha256(("{" + ", ".join(parts) + "}").encode()).hexdigest()

    def tasks(self, file: str = "tasks.json") -> list[dict[str, Any]]:
        return json.loads((self.folder / file).read_text())

    def gold(self) -> dict[str, Any]:
        return json.loads((self.folder / "gold_hashes.json").read_text())


def dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


@lru_cache(maxsize=None)
def domain(name: str) -> Tau2Domain:
    return Tau2Domain(name)


def available(name: str) -> bool:
    return (SHARED_TARGETS / "tau2" / name / "db.json").exists()


def gold_actions(task: dict[str, Any]) -> list[dict[str, Any]]:
    criteria = task.get("evaluation_criteria") or {}
    return list(criteria.get("actions") or [])


def task_files() -> list[str]:
    return ["tasks.json", "tasks_release_2025-06-10.json"]


def data_path(name: str) -> Path:
    return SHARED_TARGETS / "tau2" / name


def message(tool, db, name: str, arguments: dict[str, Any]) -> str:
    """A tool call's message content as τ² shows it: the result (JSON unless a string), or ``Error: <message>``."""
    try:
        result = tool(db, name, arguments)
    except Exception as exc:  # noqa: BLE001 - τ² and its servers report any failure this way
        return f"Error: {exc}"
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


def gold_hash_mismatches(name: str, file: str, tool) -> list[str]:
    """Ids of the tasks whose gold actions, replayed with ``tool`` on the real database, do not end in τ²'s hash."""
    source = domain(name)
    gold = source.gold()["tasks"][file]
    mismatched = []
    for task in source.tasks(file):
        db = source.fresh()
        for action in gold_actions(task):
            message(tool, db, action["name"], action["arguments"])
        if source.hash(db) != gold[task["id"]]["final_hash"]:
            mismatched.append(task["id"])
    return mismatched


def compare_with(name: str, tool, reference, probes: list) -> int:
    """Replay every gold call of tasks.json, then ``probes``, with both tools on fresh copies of the real
    database; assert each message is identical and return how many were compared."""
    source = domain(name)
    sequences = [[(a["name"], a["arguments"]) for a in gold_actions(task)] for task in source.tasks()] + [probes]
    compared = 0
    for sequence in sequences:
        ours, theirs = source.fresh(), source.fresh()
        for tool_name, arguments in sequence:
            mine, expected = message(tool, ours, tool_name, arguments), message(reference, theirs, tool_name, arguments)
            assert mine == expected, (tool_name, arguments, mine[:300], expected[:300])
            compared += 1
    return compared
