"""``factory envs``: list, show and remove registered envs.

Every entry is checked on its own: a broken or tampered one is listed as such, with the command that fixes
it, and never hides the others. ``remove`` works on broken entries too (it is how you fix them).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table

from factory.cli.common import JsonOption, RegistryOption, console, emit_json, errors, fail, parse_env_ref, plain, safe
from factory.cli.summary import summary_table

if TYPE_CHECKING:
    from env_registry.registry import Entry, Registry

app = typer.Typer(help="Inspect and manage the env registry.", no_args_is_help=True)

_STATUS_STYLE = {"ok": "green", "broken": "bold red", "tampered": "bold red"}


def _registry(path: Optional[Path]) -> "Registry":
    """The registry at ``path``; a path that exists but is no folder is refused here, with the fix."""
    from env_registry.registry import Registry

    registry = Registry(path)
    if registry.root.exists() and not registry.root.is_dir():
        fail(f"registry {registry.root} is a file, not a folder; pass --registry with the registry folder (or set $TRACE_FACTORY_REGISTRY)")
    return registry


def _status(entry: "Entry") -> str:
    """What the listing says: the gate's verdict for a verified entry, else what is wrong with it."""
    if entry.status == "ok" and entry.manifest is not None:
        return entry.manifest.validation
    return entry.status


@app.command("list")
def envs_list(registry: RegistryOption = None, as_json: JsonOption = False) -> None:
    """List registered envs, every version, each verified (a broken or tampered entry is listed as such, with its fix).

    Examples:

    factory envs list

    factory envs list --json --registry ./envs
    """
    from env_registry.registry import RegistryError

    store = _registry(registry)
    try:
        entries = store.entries()
    except RegistryError as exc:
        fail(str(exc))
        return
    if as_json:
        emit_json([_entry_json(e) for e in entries])
        return
    if not entries:
        console.print(f"No envs registered in {safe(store.root)}. Build one: factory build --capability precondition_verification", soft_wrap=True)
        return
    rows = []
    for e in entries:
        m = e.manifest
        rows.append({
            "gym id": e.gym_id,
            "status": _status(e),
            "target": m.target if m else "-",
            "generator": m.provenance.generator if m else "-",
            "tools": str(len(m.tools)) if m else "-",
            "created": m.created_at.strftime("%Y-%m-%d %H:%M") if m else "-",
        })
    styles = {"status": lambda value: {"passed": "green", "failed": "red", "broken": "bold red", "tampered": "bold red"}.get(value, "")}
    columns = ["gym id", "status", "target", "generator", "tools", "created"]
    console.print(summary_table(f"envs in {store.root}", columns, rows, console.width, styles, key="gym id"))
    for e in entries:
        if e.problem:
            errors.print(plain(e.problem, _STATUS_STYLE[e.status]), soft_wrap=True)


def _entry_json(entry: "Entry") -> dict[str, object]:
    data: dict[str, object] = {}
    if entry.manifest is not None:
        data = entry.manifest.model_dump(mode="json", exclude={"tools"})
    data.update(gym_id=entry.gym_id, capability=entry.capability, version=entry.version, path=str(entry.path),
                status=entry.status, problem=entry.problem)
    return data


@app.command("show")
def envs_show(
    capability: Annotated[str, typer.Argument(help="Capability name, or a gym id like trace/<capability>-v0.")],
    version: Annotated[Optional[int], typer.Option("--version", "-v", min=0, help="Version (default: latest).")] = None,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one env's manifest, verifying its content hash.

    Examples:

    factory envs show precondition_verification

    factory envs show trace/precondition_verification-v0 --json
    """
    from env_registry.registry import RegistryError

    capability, version = parse_env_ref(capability, version)
    try:
        stored = _registry(registry).get(capability, version)
    except RegistryError as exc:
        fail(str(exc))
        return
    manifest = stored.manifest
    if as_json:
        emit_json(manifest)
        return
    provenance = manifest.provenance
    origin = provenance.model or provenance.blueprint or provenance.file
    table = Table(title=manifest.gym_id, show_header=False, title_justify="left")
    table.add_column(no_wrap=True, style="bold")
    table.add_column(overflow="fold")
    for key, value in (
        ("target", manifest.target),
        ("description", manifest.description),
        ("tools", ", ".join(t.name for t in manifest.tools)),
        ("max steps", str(manifest.max_steps)),
        ("generator", provenance.generator + (f" ({origin})" if origin else "")),
        ("validation", manifest.validation),
        ("content hash", manifest.content_hash + " (verified)"),
        ("path", str(stored.path)),
    ):
        table.add_row(key, plain(value))
    console.print(table)


@app.command("remove")
def envs_remove(
    capability: Annotated[str, typer.Argument(help="Capability name (a folder listed by `factory envs list`), or a gym id.")],
    version: Annotated[Optional[int], typer.Option("--version", "-v", min=0, help="Only this version (default: all).")] = None,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove an env (all versions, or one), broken or not.

    Examples:

    factory envs remove precondition_verification --version 0

    factory envs remove trace/datetime_reasoning-v2 --json
    """
    from schemas.files import explain
    from env_registry.registry import RegistryError

    capability, version = parse_env_ref(capability, version)
    store = _registry(registry)
    try:
        removed = store.remove(capability, version)
    except RegistryError as exc:
        fail(str(exc))
        return
    except OSError as exc:
        fail(f"cannot change registry {store.root}: {explain(exc)}", code=1)
        return
    ids = [f"trace/{capability}-v{v}" for v in removed]
    if as_json:
        emit_json({"removed": ids, "capability": capability, "registry": str(store.root)})
        return
    console.print(f"removed {safe(', '.join(ids) or capability)}", soft_wrap=True)
