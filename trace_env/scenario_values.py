"""Inside the sandbox: what the validation gate reads in a scenario's values.

- masking: ids and names replaced by ``<id>``, so "scenarios that differ only in an id" hash equal;
- value pools and templates: fuzzed actions may name values instead of spelling them
  (``{"$pool": 3, "type": "string", "key": "reservation_id"}``: a value found under that key in the scenario
  or in an earlier tool result; ``"mutate"``: the same value changed in one character, well-formed but
  unknown; ``"like"``: another value of the same shape); ``{"$all": "reservation_id"}`` is every value read
  under that key (a list argument widened); ``{"$repeat": j}`` replays turn j; a turn whose
  content is ``{"$echo": "user"}`` says back the last thing the user said. They are
  resolved here, where the scenario is, and the resolved turns go back to the host, so every
  counterexample replays as plain JSON.

Stdlib only: this runs next to untrusted env code.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from trace_env.sdk import Scenario, canonical_json

MAX_POOL = 400

_ID_KEY = re.compile(r"(?:^|_)(?:id|ids|name|email|username|phone|phone_number|uuid)$", re.IGNORECASE)
_ID_SHAPE = re.compile(r"^(?=[^ ]*\d)[A-Za-z0-9_#.\-@+]{4,64}$|^[A-Z0-9]{5,12}$")
_NOT_ID = re.compile(r"^\d{4}-\d{2}-\d{2}|^\d{1,2}:\d{2}|^[-+]?\d+(\.\d+)?$")
_TOKEN = re.compile(r"[#A-Za-z0-9_@+'](?:[A-Za-z0-9_.\-@+']*[A-Za-z0-9_])?")
_KEYED = re.compile(r'"([^"\\]{1,64})":"((?:[^"\\]|\\.){1,80})"')


def looks_like_id(text: str) -> bool:
    return bool(_ID_SHAPE.match(text)) and not _NOT_ID.match(text)


class Masker:
    """Replaces the ids and names of one scenario by ``<id>``, so scenarios that differ only in those hash equal.

    Ids are tokens that look like ids (``#W2271620``, ``mia_li_3668``, ``4NC8I6``, emails); names are the
    words of values under keys such as ``name``, ``first_name``, ``user_id``. Both are found in the
    scenario's canonical JSON text with two regex passes (C speed: it matters for big states) and masked by
    set lookups. A mapping keyed by ids counts as the sorted list of its masked values, so the random order
    of ids cannot tell seeds apart.
    """

    def __init__(self, canonical_text: str) -> None:
        keyed = {
            word
            for key, value in _KEYED.findall(canonical_text)
            if _ID_KEY.search(key) and len(value.split()) <= 4
            for word in value.split()
            if len(word) >= 2
        }
        self.names = {token for token in set(_TOKEN.findall(canonical_text)) if token in keyed or looks_like_id(token)}
        self._seen: dict[str, str] = {}

    def text(self, text: str) -> str:
        masked = self._seen.get(text)
        if masked is None:  # the same option values and phrases recur all over a scenario
            masked = self._seen[text] = _TOKEN.sub(lambda m: "<id>" if m.group(0) in self.names else m.group(0), text)
        return masked

    def masked_words(self, text: str, limit: int = 200) -> list[str]:
        """The ids and names :meth:`text` masks in ``text`` (sorted, at most ``limit``): the leak check asks
        whether one recurs across seeds exactly with a decision (a verdict hidden in a name)."""
        return sorted({token[:64] for token in _TOKEN.findall(text) if token in self.names})[:limit]

    def structure(self, value: Any) -> Any:
        """The value masked: ids and names as whole strings or keys become ``<id>`` (a dict lookup), free
        text (strings with spaces) goes through the regex, and a mapping keyed by ids becomes the sorted list
        of its masked values."""
        if isinstance(value, str):
            if value in self.names:
                return "<id>"
            return self.text(value) if " " in value else value
        if isinstance(value, dict):
            if value and all(isinstance(k, str) and k in self.names for k in value):
                return sorted((self.structure(v) for v in value.values()), key=canonical_json)
            return {("<id>" if k in self.names else k): self.structure(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.structure(v) for v in value]
        return value

    def skeleton(self, value: Any) -> Any:
        """:meth:`structure` with free text (a string with spaces: an opening, a note) as ``<text>``: the scenario as
        structured records, so seeds that differ only in how a request is phrased count as one case."""
        masked = self.structure(value)

        def strip(item: Any) -> Any:
            if isinstance(item, str):
                return "<text>" if " " in item.strip() else item
            if isinstance(item, dict):
                return {k: strip(v) for k, v in item.items()}
            if isinstance(item, list):
                return [strip(v) for v in item]
            return item

        return strip(masked)

    def fingerprint(self, value: Any) -> str:
        """The digest of :meth:`skeleton`: what diversity counts as distinct cases (ids, names and wording masked)."""
        return hashlib.sha256(canonical_json(self.skeleton(value)).encode()).hexdigest()[:20]


# --- value pools and templates -----------------------------------------------------------------


Entry = tuple[str, Any, str]  # (type name, value, the key it was found under)


def _leaves(value: Any, out: list[Entry], key: str = "", depth: int = 0) -> None:
    """Leaf values of a JSON value with the key each sits under (a mapping keyed by ids gives its keys
    under the singular of its own key: ``reservations`` -> ``reservation_id``)."""
    if len(out) >= MAX_POOL or depth > 12:
        return
    if isinstance(value, dict):
        for k in value:
            if isinstance(k, str) and looks_like_id(k):
                out.append(("str", k, key.rstrip("s") + "_id" if key else "id"))
            _leaves(value[k], out, str(k), depth + 1)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, out, key, depth + 1)
    elif isinstance(value, (bool, int, float)):
        out.append((type(value).__name__, value, key))
    elif isinstance(value, str) and 0 < len(value) <= 64 and "\n" not in value:
        out.append(("str", value, key))


def shape(value: Any) -> str:
    """A value's kind, for "another value like this one": for strings the punctuation skeleton and the
    letter case (``#W2271620`` ~ ``#W8504689``, ``mia_li_3668`` ~ ``noah_kim_1204``), plus the length when
    there is no punctuation (``4NC8I6`` ~ ``ZF6XMJ``); for numbers, int or float."""
    if isinstance(value, str):
        skeleton = "".join(c for c in value if not c.isalnum() and c != " ")
        case = "digits" if value.isdigit() else "upper" if value.isupper() else "lower" if value.islower() else "mixed"
        return f"{skeleton}|{case}|{len(value) if not skeleton else ''}|{' ' in value}"
    return type(value).__name__


def mutate(value: Any, salt: int = 0) -> Any:
    """Well-formed but unknown: one character changed within its class, or a number nudged."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1 + salt % 7
    if isinstance(value, float):
        return round(value + 1.0 + salt % 7, 2)
    if isinstance(value, str) and value:
        positions = [i for i, c in enumerate(value) if c.isalnum()] or [len(value) - 1]
        i = positions[-1 - salt % len(positions)]
        c = value[i]
        if c.isdigit():
            c = str((int(c) + 1 + salt % 8) % 10)
        elif c.isupper():
            c = chr((ord(c) - 65 + 1 + salt % 24) % 26 + 65)
        elif c.islower():
            c = chr((ord(c) - 97 + 1 + salt % 24) % 26 + 97)
        else:
            c = "x"
        return value[:i] + c + value[i + 1:]
    return value


class ValuePool:
    """Values an agent could have seen: the scenario's (state and user) and those of earlier tool results.
    Collected lazily: most turns of most episodes name no template, and big states are slow to walk."""

    def __init__(self, scenario: Scenario) -> None:
        self._source = scenario
        self._texts: list[str] = []
        self._ready = False
        self.scenario: list[Entry] = []
        self.seen: list[Entry] = []
        self.last_user = ""

    def heard(self, text: str) -> None:
        """The user's latest message (what an echoing policy says back)."""
        self.last_user = text

    def observe(self, text: str) -> None:
        if self._ready:
            self._add(text)
        else:
            self._texts.append(text)

    def _add(self, text: str) -> None:
        if len(self.seen) >= MAX_POOL:
            return
        try:
            value = json.loads(text)
        except (ValueError, TypeError):
            value = [t for t in _TOKEN.findall(text or "") if looks_like_id(t)]
        found: list[Entry] = []
        _leaves(value, found)
        for item in found:
            if item not in self.seen:
                self.seen.append(item)

    def _load(self) -> None:
        if not self._ready:
            found: list[Entry] = []
            _leaves({"state": self._source.state, "user": self._source.user}, found)
            self.scenario = list(dict.fromkeys(found))
            self._ready = True
            for text in self._texts:
                self._add(text)

    def pick(self, spec: dict[str, Any]) -> Any:
        """The value a template names. Values found under the argument's own name come first (a
        ``reservation_id`` argument gets reservation ids), then id-like values for ``*_id`` arguments,
        then any value of the type."""
        self._load()
        index = int(spec.get("$pool") or 0)
        wanted = {"string": ("str",), "integer": ("int",), "number": ("int", "float"), "boolean": ("bool",)}.get(
            str(spec.get("type")), ("str", "int", "float")
        )
        key = str(spec.get("key") or "")
        sources = [self.seen, self.scenario] if spec.get("from") == "seen" else [self.scenario, self.seen]
        candidates: list[Any] = []
        for source in sources:
            typed = [(v, k) for t, v, k in source if t in wanted]
            candidates = [v for v, k in typed if key and k == key]
            if not candidates and key.endswith("id"):
                candidates = [v for v, _ in typed if isinstance(v, str) and looks_like_id(v)]
            candidates = list(dict.fromkeys(candidates or [v for v, _ in typed]))
            if candidates:
                break
        if "like" in spec:
            original = spec["like"]
            same = [v for v in candidates if v != original and shape(v) == shape(original)]
            return same[index % len(same)] if same else mutate(original, index)
        if not candidates:
            return {"str": "x", "int": 0, "float": 0.0, "bool": False}[wanted[0]]
        value = candidates[index % len(candidates)]
        return mutate(value, index) if spec.get("mutate") else value

    def every(self, spec: dict[str, Any]) -> list[Any]:
        """``{"$all": key}``: every distinct value of the type read so far under ``key`` (id-like values for an
        ``*_id`` key with none under it): a list argument widened to everything the agent saw (a shotgun)."""
        self._load()
        wanted = {"string": ("str",), "integer": ("int",), "number": ("int", "float")}.get(str(spec.get("type")), ("str",))
        key = str(spec.get("$all") or "")
        typed = [(v, k) for t, v, k in self.seen if t in wanted]
        found = [v for v, k in typed if k == key]
        if not found and key.endswith("id"):
            found = [v for v, _ in typed if isinstance(v, str) and looks_like_id(v)]
        return list(dict.fromkeys(found))[:MAX_POOL]

    def resolve(self, value: Any) -> Any:
        if isinstance(value, dict):
            if "$pool" in value:
                return self.pick(value)
            if "$all" in value:
                return self.every(value)
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value


def resolve_turn(turn: Any, pool: ValuePool, done: list[Any]) -> Any:
    if isinstance(turn, dict) and "$repeat" in turn:
        return done[int(turn["$repeat"]) % len(done)] if done else {"content": None, "calls": []}
    if not isinstance(turn, dict):
        return turn
    if isinstance(turn.get("content"), dict) and "$echo" in turn["content"]:
        turn = {**turn, "content": pool.last_user}
    resolved = pool.resolve(turn)
    if isinstance(resolved.get("content"), list):
        resolved["content"] = " ".join(str(part) for part in resolved["content"])
    return resolved
