"""Build the routing menu: for each capability its description, its adapter and one successful demo.

Capabilities come from the adapters on hand (a capability without an adapter cannot be applied), or from
``factory analyze``'s ``capabilities.json``, or from the env registry, in that order of preference. The
description comes from the analysis when it has one (that is the wording the failures were labeled
with), else from the env's manifest. The demo is the reference episode of the capability's latest
validated env, played in a sandbox (:mod:`router.demos`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import ValidationError

from env_registry.registry import Registry, RegistryError, StoredEnv
from router.demos import DEFAULT_SEEDS, reference_demo
from router.errors import RouterError
from router.schema import MenuOption, RoutingMenu
from sandbox import SandboxLimits
from schemas.capability import CapabilityReport
from schemas.errors import validation_message

MenuProgress = Callable[[str, int, int], None]
"""Called with (capability, done, total) as each demo is ready."""


def latest_validated(registry: Registry, capability: str) -> tuple[StoredEnv, str | None]:
    """The newest version that passed the gate, else the newest one with a note saying it is unvalidated."""
    versions = registry.versions(capability)
    if not versions:
        known = ", ".join(registry.capabilities()) or "none"
        raise RouterError(
            f"no env registered for capability {capability!r} in {registry.root} (registered: {known}); "
            f"build it with `factory build {capability}` so the router can show a demo of it"
        )
    for version in reversed(versions):
        stored = registry.get(capability, version)
        if stored.manifest.validation == "passed":
            return stored, None
    stored = registry.get(capability, versions[-1])
    return stored, f"{stored.manifest.gym_id} has not passed the validation gate; its demo is used anyway"


def capability_order(
    adapters: Mapping[str, str | Path] | None, report: CapabilityReport | None, registry: Registry
) -> list[str]:
    """Which capabilities the menu offers, in canonical (label) order."""
    ranked = [f.name for f in report.capabilities] if report is not None else []
    if adapters:
        names = list(adapters)
        return [n for n in ranked if n in adapters] + sorted(n for n in names if n not in ranked)
    if ranked:
        return ranked
    names = registry.capabilities()
    if not names:
        raise RouterError(
            f"nothing to route to: no adapters given, no capabilities.json, and no envs in {registry.root}; "
            f"pass --adapters DIR or --capabilities capabilities.json"
        )
    return names


def _description(capability: str, stored: StoredEnv, report: CapabilityReport | None) -> str:
    if report is not None:
        for finding in report.capabilities + report.candidates:
            if finding.name == capability and finding.description.strip():
                return finding.description.strip()
    if stored.manifest.description.strip():
        return stored.manifest.description.strip()
    raise RouterError(
        f"no description for capability {capability!r}: its env manifest has none and capabilities.json does not "
        f"list it; pass --capabilities with the capabilities.json from `factory analyze`"
    )


def build_menu(
    *,
    adapters: Mapping[str, str | Path] | None = None,
    report: CapabilityReport | None = None,
    registry: Registry | None = None,
    capabilities: list[str] | None = None,
    backend: str = "auto",
    seeds: tuple[int, ...] = DEFAULT_SEEDS,
    limits: SandboxLimits | None = None,
    progress: MenuProgress | None = None,
    workers: int = 4,
) -> RoutingMenu:
    """Assemble the menu; the demos are played in sandboxes, several at once."""
    registry = registry or Registry()
    names = capabilities or capability_order(adapters, report, registry)
    stored: dict[str, StoredEnv] = {}
    notes: list[str] = []
    for name in names:
        try:
            stored[name], note = latest_validated(registry, name)
        except RegistryError as exc:
            raise RouterError(str(exc)) from None
        if note:
            notes.append(note)
    descriptions = {name: _description(name, stored[name], report) for name in names}
    done = 0

    def demo(name: str):  # type: ignore[no-untyped-def]
        return reference_demo(stored[name], backend=backend, seeds=seeds, limits=limits)

    demos = {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(names)))) as pool:
        futures = {name: pool.submit(demo, name) for name in names}
        for name in names:
            demos[name] = futures[name].result()
            done += 1
            if progress:
                progress(name, done, len(names))
    adapter_paths = {k: str(Path(v)) for k, v in (adapters or {}).items()}
    return RoutingMenu(
        options=[
            MenuOption(capability=n, description=descriptions[n], adapter=adapter_paths.get(n), demo=demos[n])
            for n in names
        ],
        notes=notes,
    )


def save_menu(menu: RoutingMenu, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(menu.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def load_menu(path: Path) -> RoutingMenu:
    """Read a saved menu; a bad file becomes one :class:`RouterError` line."""
    try:
        return RoutingMenu.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RouterError(f"menu {path}: no such file; write one with `factory route --save-menu {path}`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RouterError(f"menu {path}: cannot read it ({exc})") from None
    except ValidationError as exc:
        raise RouterError(f"menu {path}: not a routing menu ({validation_message(exc)}); rebuild it with --save-menu") from None
