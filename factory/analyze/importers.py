"""Import agent trajectories into ``schemas.Trajectory``, whatever the file's format.

Formats are detected from the content, not the file name: τ²-bench ``Results`` (``format_tau2``), τ-bench
v1 result lists (``format_tau_bench``) and our own JSONL (one ``Trajectory`` per line, or a JSON list of
them, as ``factory rollout`` writes). A bad file raises ``TrajectoryFormatError`` naming the file, the
record and the field.

Every trajectory id names its source: ``<file>:<task>#<trial>``, where ``<file>`` is the file's stem (or
as much of its path as tells two inputs apart), so an id in a report always says where to look.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from factory.analyze import format_tau2, format_tau_bench
from factory.analyze.errors import TrajectoryFormatError
from schemas.errors import validation_message
from schemas.jsonl import jsonl_lines
from schemas.trajectory import Trajectory


@dataclass
class ImportResult:
    trajectories: list[Trajectory] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    formats: Counter = field(default_factory=Counter)


class _JsonLines:
    def __init__(self, text: str) -> None:
        self.text = text


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TrajectoryFormatError(path, "no such file") from None
    except IsADirectoryError:
        raise TrajectoryFormatError(path, "is a directory without results.json or simulations/") from None
    except UnicodeDecodeError:
        raise TrajectoryFormatError(path, "not a UTF-8 text file") from None
    except OSError as exc:
        raise TrajectoryFormatError(path, f"cannot read ({exc.strerror or exc})") from None


def _read_json(path: Path) -> Any:
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # several JSON values: JSON Lines under a .json name
            return _JsonLines(text)
        raise TrajectoryFormatError(path, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise TrajectoryFormatError(path, "JSON nested too deeply") from None


def _ours(path: Path, items: list[tuple[str, Any]]) -> list[Trajectory]:
    out = []
    for record, raw in items:
        label = record + (f" (id {raw['id']!r})" if isinstance(raw, dict) and isinstance(raw.get("id"), str) else "")
        if isinstance(raw, dict) and "reward" in raw:
            format_tau2.checked_reward(path, label, "reward", raw["reward"])
        try:
            trajectory = Trajectory.model_validate(raw)
        except ValidationError as exc:
            raise TrajectoryFormatError(path, validation_message(exc), record=label) from None
        metadata = {**trajectory.metadata, "source_file": str(path), "record": record}
        out.append(trajectory.model_copy(update={"metadata": metadata}))
    return out


def _jsonl_items(path: Path, text: str) -> list[tuple[str, Any]]:
    items = []
    for number, line in enumerate(jsonl_lines(text), start=1):
        if not line.strip():
            continue
        try:
            items.append((f"line {number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise TrajectoryFormatError(path, f"not valid JSON ({exc.msg} at column {exc.colno})", record=f"line {number}") from None
        except RecursionError:
            raise TrajectoryFormatError(path, "JSON nested too deeply", record=f"line {number}") from None
    return items


def _tau2_dir(path: Path) -> list[Trajectory]:
    results_file = path / "results.json" if path.is_dir() else path
    sims_dir = results_file.parent / "simulations"
    data = _read_json(results_file) if results_file.exists() else {}
    if not isinstance(data, dict):
        raise TrajectoryFormatError(results_file, "expected a τ² Results object")
    extra = []
    if not data.get("simulations") and sims_dir.is_dir():
        for sim_file in sorted(sims_dir.glob("*.json")):
            extra.append((f"simulations/{sim_file.name}", _read_json(sim_file)))
    if not results_file.exists() and not extra:
        raise TrajectoryFormatError(path, "directory has neither results.json nor simulations/*.json")
    return format_tau2.parse_results(results_file, data, extra)


def load_file(path: Path, result: ImportResult | None = None) -> list[Trajectory]:
    """Trajectories of one file (or τ² results folder), whatever its format; ids not yet qualified."""
    result = result if result is not None else ImportResult()
    path = Path(path)
    if path.is_dir():
        result.formats["tau2-dir"] += 1
        return _tau2_dir(path)
    if not path.exists():
        raise TrajectoryFormatError(path, "no such file")
    if path.suffix == ".jsonl":
        result.formats["jsonl"] += 1
        return _ours(path, _jsonl_items(path, _read_text(path)))
    data = _read_json(path)
    if isinstance(data, _JsonLines):
        result.formats["jsonl"] += 1
        return _ours(path, _jsonl_items(path, data.text))
    if isinstance(data, dict):
        if "simulations" in data or "simulation_index" in data:
            result.formats["tau2"] += 1
            if not data.get("simulations") and (path.parent / "simulations").is_dir():
                return _tau2_dir(path)
            return format_tau2.parse_results(path, data)
        if "messages" in data and "termination_reason" in data and "task_id" in data:
            result.formats["tau2-simulation"] += 1
            return format_tau2.parse_results(path, {"simulations": [data]})
        if isinstance(data.get("trajectories"), list):
            result.formats["json"] += 1
            return _ours(path, [(f"trajectories[{i}]", t) for i, t in enumerate(data["trajectories"])])
        raise TrajectoryFormatError(
            path, "unrecognised JSON object: expected a τ² Results file (with 'simulations') or {'trajectories': [...]}"
        )
    if isinstance(data, list):
        if not data:
            return []
        first = data[0]
        if isinstance(first, dict) and "traj" in first:
            result.formats["tau-bench"] += 1
            return format_tau_bench.parse_results(path, data, result.skipped)
        if isinstance(first, dict) and "messages" in first:
            result.formats["json"] += 1
            return _ours(path, [(f"record [{i}]", t) for i, t in enumerate(data)])
        raise TrajectoryFormatError(
            path, "unrecognised JSON list: expected τ-bench results ({task_id, reward, info, traj}) or trajectories", record="record [0]"
        )
    raise TrajectoryFormatError(path, f"unrecognised JSON {type(data).__name__}: expected an object or a list")


def file_labels(paths: list[Path]) -> list[str]:
    """A short label per input that tells them apart: the stem, or as many trailing path parts as needed."""
    parts = [list(Path(p).resolve().with_suffix("").parts) if not Path(p).is_dir() else list(Path(p).resolve().parts) for p in paths]
    depth = 1
    while True:
        labels = ["/".join(p[-depth:]) for p in parts]
        clash = Counter(labels)
        if all(clash[label] == 1 or len(p) <= depth for label, p in zip(labels, parts)) or depth > 32:
            return labels
        depth += 1


def load_trajectories(paths: list[Path]) -> ImportResult:
    """Trajectories of several files; every id is ``<file label>:<id in the file>``, unique over the inputs."""
    result = ImportResult()
    paths = [Path(p) for p in paths]
    seen: set[str] = set()
    for path, label in zip(paths, file_labels(paths)):
        for trajectory in load_file(path, result):
            base = f"{label}:{trajectory.id}"
            tid, n = base, 1
            while tid in seen:  # the same task and trial twice in one file
                n += 1
                tid = f"{base}~{n}"
            seen.add(tid)
            metadata = {**trajectory.metadata, "original_id": trajectory.id}
            result.trajectories.append(trajectory.model_copy(update={"id": tid, "metadata": metadata}))
    return result


def write_jsonl(trajectories: list[Trajectory], path: Path) -> None:
    """Our own format: one ``Trajectory`` per line."""
    with Path(path).open("w", encoding="utf-8") as handle:
        for trajectory in trajectories:
            handle.write(trajectory.model_dump_json(exclude_none=True) + "\n")
