"""Gymnasium ids have one registration site and one caller path (issue 26): only ``env_registry/registration.py``
calls ``gym.register`` (the built-in targets' ids too), and nothing pops an id. The pipeline's train stage points
ids at its run's registry through ``register_all(..., repoint=True)``: the spec stays, only its root changes."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGES = ("schemas", "sandbox", "env_registry", "fuzz", "llm_clients", "trainer", "router", "factory", "integrations")
SITE = "env_registry/registration.py"


def _gym_registry_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """``gym.register(...)``/``gymnasium.register(...)``, ``<...>.registry.pop(...)`` and ``del <...>.registry[...]``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if node.func.attr == "register" and isinstance(owner, ast.Name) and owner.id in ("gym", "gymnasium"):
                found.append((node.lineno, f"{owner.id}.register"))
            if node.func.attr == "pop" and isinstance(owner, ast.Attribute) and owner.attr == "registry":
                found.append((node.lineno, "registry.pop"))
        if isinstance(node, ast.ImportFrom) and node.module in ("gymnasium", "gymnasium.envs.registration"):
            found += [(node.lineno, f"from {node.module} import register") for alias in node.names if alias.name == "register"]
        if isinstance(node, ast.Delete):
            found += [(node.lineno, "del registry[...]") for t in node.targets
                      if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) and t.value.attr == "registry"]
    return found


def test_only_the_registration_module_registers_gym_ids_and_nothing_pops_one() -> None:
    elsewhere, popped = [], []
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            rel = path.relative_to(REPO_ROOT).as_posix()
            for line, what in _gym_registry_writes(ast.parse(path.read_text(encoding="utf-8"))):
                if "register" not in what:
                    popped.append(f"{rel}:{line}: {what}")
                elif rel != SITE:
                    elsewhere.append(f"{rel}:{line}: {what}")
    assert not elsewhere, "register gym ids through env_registry.registration.register_spec / register_all:\n" + "\n".join(elsewhere)
    assert not popped, "an id is re-pointed, never popped and registered again:\n" + "\n".join(popped)


def _registry(root: Path, capability: str) -> Path:
    (root / capability / "v0").mkdir(parents=True)
    (root / capability / "v0" / "manifest.json").write_text("{}")  # registration reads names only
    return root


def test_the_pipeline_points_ids_at_its_run_registry_without_re_registering_them(tmp_path: Path) -> None:
    import gymnasium as gym

    from env_registry.registration import register_all, registered_root
    from factory.pipeline.stages.train import point_gym_at

    capability = "gym_ids_probe"
    env_id = f"trace/{capability}-v0"
    first = _registry(tmp_path / "first", capability)
    run = _registry(tmp_path / "run", capability)
    try:
        assert register_all(first) == [env_id]
        spec = gym.spec(env_id)
        point_gym_at(run)
        assert gym.spec(env_id) is spec  # the same spec object: never popped, never registered again
        assert registered_root(capability, 0) == run.resolve()
        register_all()  # what the trainer's env pool calls: adds missing ids, re-points none
        assert gym.spec(env_id) is spec and registered_root(capability, 0) == run.resolve()
    finally:
        from env_registry import registration

        gym.registry.pop(env_id, None)  # this test's id only (a test may clean up what it made)
        registration._ROOTS.pop(env_id, None)
