"""``factory envs``: list, show and remove registered envs."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer
from rich.table import Table

from env_registry.registry import Registry, RegistryError
from factory.cli.common import JsonOption, RegistryOption, console, fail, parse_env_ref

app = typer.Typer(help="Inspect and manage the env registry.", no_args_is_help=True)


@app.command("list")
def envs_list(registry: RegistryOption = None, as_json: JsonOption = False) -> None:
    """List registered envs, every version.

    Example: factory envs list --json
    """
    manifests = Registry(registry).manifests()
    if as_json:
        print(json.dumps([m.model_dump(mode="json", exclude={"tools"}) | {"gym_id": m.gym_id} for m in manifests], indent=2))
        return
    if not manifests:
        console.print("No envs registered. Build one: factory build --capability precondition_verification")
        return
    table = Table(title=f"envs in {Registry(registry).root}")
    for column in ("gym id", "target", "generator", "validation", "tools", "created"):
        table.add_column(column, no_wrap=column in ("gym id", "created"))
    for m in manifests:
        table.add_row(
            m.gym_id, m.target, m.provenance.generator, m.validation, str(len(m.tools)), m.created_at.strftime("%Y-%m-%d %H:%M")
        )
    console.print(table)


@app.command("show")
def envs_show(
    capability: Annotated[str, typer.Argument(help="Capability name, or a gym id like trace/<capability>-v0.")],
    version: Annotated[Optional[int], typer.Option("--version", "-v", help="Version (default: latest).")] = None,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one env's manifest, verifying its content hash.

    Example: factory envs show precondition_verification
    """
    capability, version = parse_env_ref(capability, version)
    try:
        stored = Registry(registry).get(capability, version)
    except RegistryError as exc:
        fail(str(exc))
        return
    manifest = stored.manifest
    if as_json:
        print(manifest.model_dump_json(indent=2))
        return
    table = Table(title=manifest.gym_id, show_header=False)
    table.add_row("target", manifest.target)
    table.add_row("description", manifest.description)
    table.add_row("tools", ", ".join(t.name for t in manifest.tools))
    table.add_row("max steps", str(manifest.max_steps))
    table.add_row("generator", manifest.provenance.generator + (f" ({manifest.provenance.model})" if manifest.provenance.model else ""))
    table.add_row("validation", manifest.validation)
    table.add_row("content hash", manifest.content_hash + " (verified)")
    table.add_row("path", str(stored.path))
    console.print(table)


@app.command("remove")
def envs_remove(
    capability: Annotated[str, typer.Argument(help="Capability name, or a gym id.")],
    version: Annotated[Optional[int], typer.Option("--version", "-v", help="Only this version (default: all).")] = None,
    registry: RegistryOption = None,
) -> None:
    """Remove an env (all versions, or one).

    Example: factory envs remove precondition_verification --version 0
    """
    capability, version = parse_env_ref(capability, version)
    try:
        removed = Registry(registry).remove(capability, version)
    except RegistryError as exc:
        fail(str(exc))
        return
    console.print(f"removed {', '.join(f'trace/{capability}-v{v}' for v in removed)}")
