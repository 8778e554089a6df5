"""Installed distributions and what they require, found from their metadata. Host side.

Both the Docker image (:mod:`sandbox.image`) and bwrap's site-packages layer (:mod:`sandbox.runtime`) copy a
closure of distributions; this module needs neither, so neither backend imports the other for it.
"""

from __future__ import annotations

import re
from importlib import metadata


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_closure(roots: tuple[str, ...]) -> list[metadata.Distribution]:
    """The installed distributions named in ``roots`` plus their non-extra requirements."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pragma: no cover - packaging is nearly always present
        Requirement = None  # type: ignore[assignment,misc]
    seen: dict[str, metadata.Distribution] = {}
    todo = [_norm(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[name] = dist
        for req in dist.requires or []:
            if Requirement is not None:
                r = Requirement(req)
                if r.marker is not None:
                    try:
                        if not r.marker.evaluate({"extra": ""}):
                            continue
                    except Exception:  # noqa: BLE001
                        continue
                todo.append(_norm(r.name))
            elif "extra ==" not in req:
                todo.append(_norm(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0]))
    return list(seen.values())
