"""Hand-written env modules for the six capabilities the TRACE paper trained.

Each file here is a complete env module in the generated-env contract (stdlib, ``trace_env.sdk`` and the world
kits in ``trace_env.kits``): the offline default of ``factory build`` and the worked examples shown to the LLM
generator. The kits carry the target worlds, so each blueprint holds only what its capability adds.
"""

from __future__ import annotations

from importlib import resources

def blueprint_names() -> list[str]:
    """Capabilities that have a blueprint file shipped with the package."""
    folder = resources.files(__name__)
    return sorted(
        entry.name.removesuffix(".py")
        for entry in folder.iterdir()
        if entry.name.endswith(".py") and not entry.name.startswith("_")
    )


def blueprint_source(capability: str) -> str:
    """Source text of a blueprint; unknown names list the known ones."""
    names = blueprint_names()
    if capability not in names:
        raise KeyError(f"no built-in blueprint for {capability!r}; blueprints exist for: {', '.join(names)}")
    return resources.files(__name__).joinpath(f"{capability}.py").read_text(encoding="utf-8")
