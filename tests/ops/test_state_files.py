"""A damaged state file is bad input said in one line (issues 23 and 26): the file (and line), every problem with
its location and input through the one renderer (``schemas.errors.validation_message``), and the fix; exit 2.
Never "1 validation error for PipelineState", never "internal error, a bug".

The state files the CLI reads back: ``pipeline.json`` (``factory run``), a rollout folder's ``run.json`` and
``trajectories.jsonl`` (``factory rollout``, ``factory eval``), a training run's ``metrics.jsonl`` and its
checkpoints' ``state.json`` (``factory train --resume``)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from factory.cli.exits import BAD_INPUT, exit_code
from tests.conftest import REPO_ROOT
from tests.ops.conftest import put, run_factory

PACKAGES = ("schemas", "sandbox", "env_registry", "fuzz", "llm_clients", "trainer", "router", "factory", "integrations")


def test_a_damaged_pipeline_json_names_file_location_and_fix(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    state = run_dir / "pipeline.json"
    state.write_text(json.dumps({"stages": {"rollouts": {"key": "k", "status": "finished"}}}))
    config = tmp_path / "pipeline.toml"
    config.write_text(f'run_dir = "{run_dir}"\nmodel = "tiny"\n[[targets]]\nname = "tau2-airline"\nlimit = 1\n')
    ran = run_factory("run", "--config", str(config), "--plan", timeout=120)
    assert ran.code == BAD_INPUT and len(ran.lines) == 1, ran.stderr
    line = ran.lines[0]
    assert str(state) in line and "stages.rollouts.status" in line and "'finished'" in line, line
    assert "remove it to run every stage again" in line and "validation error for" not in line, line


def test_a_damaged_rollout_folder_names_file_line_location_and_fix(tmp_path: Path) -> None:
    from factory.rollout.store import RolloutStore, RunSettings
    from schemas.trajectory import Trajectory

    settings = RunSettings(target="mcp", backend="mcp", tasks_source="t.json", policy="scripted:gold", user="scripted",
                           max_steps=4, max_errors=2, seed=0)  # fmt: skip
    (tmp_path / "run.json").write_text(settings.model_dump_json().replace('"max_steps":4', '"max_steps":"four"'))
    with RolloutStore(tmp_path) as store, pytest.raises(Exception) as caught:
        store.open(settings, {})
    said = str(caught.value)
    assert exit_code(caught.value) == BAD_INPUT
    assert str(tmp_path / "run.json") in said and "max_steps" in said and "'four'" in said and "pass another --out" in said, said

    (tmp_path / "run.json").unlink()
    good = Trajectory(id="0#0", target="mcp", task_id="0", messages=[], reward=1.0, success=True, metadata={"trial": 0})
    no_trial = good.model_copy(update={"id": "1#0", "task_id": "1", "metadata": {}})
    bad_reward = good.model_dump_json().replace('"reward":1.0', '"reward":7.0')
    lines = [good.model_dump_json(), bad_reward, good.model_dump_json()]
    (tmp_path / "trajectories.jsonl").write_text("\n".join(lines) + "\n")
    with RolloutStore(tmp_path) as store, pytest.raises(Exception) as caught:
        store.open(settings, {})
    said = str(caught.value)
    assert exit_code(caught.value) == BAD_INPUT
    assert "trajectories.jsonl line 2 is damaged" in said and "reward:" in said and "(got 7.0)" in said, said
    assert said.endswith("remove that line to resume") and "validation error for" not in said, said

    (tmp_path / "trajectories.jsonl").write_text("\n".join([no_trial.model_dump_json(), good.model_dump_json()]) + "\n")
    with RolloutStore(tmp_path) as store, pytest.raises(Exception) as caught:
        store.open(settings, {})
    assert "line 1 is damaged (metadata.trial: required key is missing)" in str(caught.value), caught.value


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("registry")
    put(root)
    return root


@pytest.mark.slow
def test_a_damaged_metrics_or_checkpoint_state_on_resume_is_exit_2_before_the_model_loads(
    tmp_path: Path, registry: Path, tiny_model: Path
) -> None:
    pytest.importorskip("torch")
    run = tmp_path / "run"
    checkpoint = run / "checkpoints" / "iter-000001"
    checkpoint.mkdir(parents=True)
    (checkpoint / "state.json").write_text(json.dumps({"iteration": 1, "order": [0], "env_id": "trace/tiny_cancel-v0"}))
    (run / "metrics.jsonl").write_text('{"iteration": 0}\n{"iteration": 1, "loss": "high"}\n{"iteration": 2}\n')
    args = ["train", "tiny_cancel", "--model", str(tiny_model), "--output", str(run), "--resume", "--sandbox", "bwrap"]
    ran = run_factory(*args, TRACE_FACTORY_REGISTRY=str(registry), timeout=180)
    assert ran.code == BAD_INPUT and len(ran.lines) == 1, ran.stderr
    line = ran.lines[0]
    assert f"{run / 'metrics.jsonl'} line 2 is damaged (loss:" in line and "'high'" in line and "remove that line to resume" in line, line

    (run / "metrics.jsonl").write_text('{"iteration": 0}\n')
    (checkpoint / "state.json").write_text(json.dumps({"iteration": -1, "order": [0]}))
    ran = run_factory(*args, TRACE_FACTORY_REGISTRY=str(registry), timeout=180)
    assert ran.code == BAD_INPUT and len(ran.lines) == 1, ran.stderr
    line = ran.lines[0]
    assert f"{checkpoint / 'state.json'} is damaged (iteration:" in line and f"remove {checkpoint} to resume" in line, line


def _raw_uses(handler: ast.ExceptHandler) -> list[tuple[int, str]]:
    """Where a ``except ... ValidationError as exc`` block says the error raw (``{exc}``, ``str(exc)``) or takes
    it apart by hand (``exc.errors()``), outside an ``isinstance(exc, ValidationError)`` guard's other branch."""
    found: list[tuple[int, str]] = []
    stack: list[tuple[ast.AST, bool]] = [(node, False) for node in handler.body]
    while stack:
        node, guarded = stack.pop()
        if isinstance(node, ast.FormattedValue) and isinstance(node.value, ast.Name) and node.value.id == handler.name:
            found.append((node.lineno, "{exc} in an f-string"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "repr") and not guarded
              and any(isinstance(a, ast.Name) and a.id == handler.name for a in node.args)):  # fmt: skip
            found.append((node.lineno, f"{node.func.id}(exc)"))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == handler.name and node.attr in ("errors", "json"):
            found.append((node.lineno, f"exc.{node.attr}()"))
        guard = guarded or (isinstance(node, (ast.If, ast.IfExp)) and _names_validation_error(node.test))
        stack.extend((child, guard) for child in ast.iter_child_nodes(node))
    return found


def _names_validation_error(node: ast.AST | None) -> bool:
    return node is not None and any(isinstance(n, (ast.Name, ast.Attribute)) and getattr(n, "id", getattr(n, "attr", "")) == "ValidationError"
                                    for n in ast.walk(node))  # fmt: skip


def test_no_pydantic_error_is_said_raw_or_reduced_by_hand() -> None:
    """Every ``except ValidationError`` hands the error to the renderer; only ``schemas/errors.py`` takes one apart.
    (Seven blocks did not: pipeline.json, run.json, trajectories.jsonl, metrics.jsonl, a build's registration,
    two τ² task readers.) Blind spot: handlers that catch ``Exception`` or ``ValueError`` without naming it."""
    problems = []
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            rel = path.relative_to(REPO_ROOT).as_posix()
            if rel == "schemas/errors.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ExceptHandler) and node.name and _names_validation_error(node.type):
                    problems += [f"{rel}:{line}: {what}" for line, what in _raw_uses(node)]
    assert not problems, "route these through schemas.errors.validation_message / one_line / schemas.files.state_file_message:\n" + "\n".join(problems)
