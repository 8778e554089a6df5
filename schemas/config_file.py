"""A user's settings: a TOML config file and ``--set KEY=VALUE`` overrides, read one way for every command.

``factory train`` (dotted keys into ``train.toml``'s sections), ``factory build`` and ``factory validate`` (the
gate's flat keys) and ``factory run`` (``pipeline.toml`` only: it has no ``--set``) all read their settings here, so a value is parsed the
same way everywhere (a TOML literal when it is one, else the text as given) and a mistake reads the same: one
line naming the file or the ``--set`` item, the key, the problem and the value given.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from schemas.errors import InputError, validation_message
from schemas.files import InputFileError, read_text

MAX_CONFIG_BYTES = 1024 * 1024
M = TypeVar("M", bound=BaseModel)


def read_toml(path: str | Path, error: type[Exception], flag: str = "--config") -> dict[str, Any]:
    """The file's table, read with the project's reader for user-named files (a FIFO, a folder, a huge or
    non-UTF-8 file is refused, never waited on); any problem raises ``error`` with one line naming ``flag``."""
    what = f"{flag} {path}"
    try:
        text = read_text(path, what, "a TOML config file", limit=MAX_CONFIG_BYTES)
    except InputFileError as exc:
        raise error(str(exc)) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{what}: not valid TOML ({exc})") from None


def parse_value(text: str) -> Any:
    """A TOML literal when the text is one (``8``, ``1e-5``, ``true``, ``[1, 2]``, ``'bwrap'``), else the text itself."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def setting_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key ``--set`` may name: a field, or ``section.field`` for a field of a nested model."""
    keys = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.extend(setting_keys(annotation, f"{prefix}{name}."))
        else:
            keys.append(prefix + name)
    return keys


def put(data: dict[str, Any], key: str, value: Any, error: type[Exception] = InputError) -> None:
    """``data[a][b] = value`` for ``key`` ``a.b`` (sections made as needed)."""
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise error(f"--set {key}: {part!r} is a value, not a section")
        node = child
    node[parts[-1]] = value


def apply_overrides(data: dict[str, Any], items: Iterable[str], model: type[BaseModel],
                    error: type[Exception] = InputError, flag: str = "--set") -> dict[str, str]:  # fmt: skip
    """Put each ``KEY=VALUE`` of ``items`` into ``data``; returns key -> the item as given, so a problem with a
    value can name the item that set it. An item that is not ``KEY=VALUE`` with a known key raises ``error``."""
    known = setting_keys(model)
    given: dict[str, str] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or key not in known:
            close = difflib.get_close_matches(key, known, n=1) if sep else []
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise error(f"{flag} {item!r}: {hint}expected KEY=VALUE with KEY one of: {', '.join(known)}")
        put(data, key, parse_value(raw.strip()), error)
        given[key] = item
    return given


def load_settings(model: type[M], data: Mapping[str, Any] | None = None, overrides: Iterable[str] = (), *,
                  values: Mapping[str, Any] | None = None, source: str = "config", error: type[Exception] = InputError,
                  flag: str = "--set") -> M:  # fmt: skip
    """``model`` from ``data`` (a config file's table, or nothing), then the ``--set`` overrides, then ``values``
    (dotted key -> value: a command's own flags; None leaves a key alone), or ``error`` with one line: each
    problem with its key, its value and where the value came from (``flag`` or ``source``)."""
    merged: dict[str, Any] = dict(data or {})
    given = apply_overrides(merged, overrides, model, error, flag)
    for key, value in (values or {}).items():
        if value is not None:
            put(merged, key, value, error)
    try:
        return model.model_validate(merged)
    except ValidationError as exc:
        raise error(settings_message(exc, model, given, source, flag)) from None


def settings_message(exc: ValidationError, model: type[BaseModel], given: Mapping[str, str], source: str, flag: str = "--set") -> str:
    """The renderer's line, each problem said where its value came from: the ``--set KEY=VALUE`` item as given
    for a value an override set, ``source: KEY`` (``--config FILE: grpo.lr``) for the rest."""

    def where(loc: tuple[Any, ...]) -> str:
        key = ".".join(map(str, loc))
        return f"{flag} {given[key]}" if key in given else f"{source}: {key or '(top level)'}"

    return validation_message(exc, model, where=where)
