"""Stage decisions that need no model or sandbox: what gets built, and the one-line failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from factory.pipeline.config import parse_config
from factory.pipeline.stages.analyze import build_plan
from factory.pipeline.stages.base import StageContext, StageError
from factory.pipeline.stages.build import BuildStage, reduced_gate
from factory.pipeline.state import Handoff
from schemas.capability import CapabilityFinding, CapabilityReport, CapabilityStats


def finding(name: str, coverage: float) -> CapabilityFinding:
    stats = CapabilityStats(capability=name, er_success=0.0, er_failure=0.5, gap=0.5, coverage=coverage, selected=True)
    return CapabilityFinding(name=name, description=f"{name} described by the analysis", stats=stats)


def report(*selected: CapabilityFinding) -> CapabilityReport:
    return CapabilityReport(labeler="offline", runs=1, delta=0.2, coverage_threshold=0.1, min_runs=1, n_trajectories=10,
                            n_successes=5, n_failures=5, targets=["tau2-airline"], capabilities=list(selected))  # fmt: skip


def config(**analyze: object):
    return parse_config({"model": "m", "targets": [{"name": "tau2-airline"}], "analyze": analyze})


def test_the_plan_is_the_selection_capped_by_coverage_rank_else_the_fallback() -> None:
    selected = report(finding("precondition_verification", 0.6), finding("multi_step_task_completion", 0.3))
    plan, source = build_plan(selected, config(max_capabilities=1, fallback=["tool_calling_precision"]))
    assert source == "analysis" and [p.model_dump() for p in plan] == [
        {"name": "precondition_verification", "description": "precondition_verification described by the analysis", "target": "tau2-airline"}
    ]
    plan, source = build_plan(report(), config(fallback=["tool_calling_precision", {"name": "refund_rules", "description": "Looks up refund rules", "target": "tau2-retail"}]))
    assert source == "fallback"
    assert [(p.name, p.target) for p in plan] == [("tool_calling_precision", "tau2-retail"), ("refund_rules", "tau2-retail")]
    assert plan[1].description == "Looks up refund rules"
    assert build_plan(report(), config()) == ([], "fallback")


def test_an_unknown_fallback_is_one_line() -> None:
    with pytest.raises(StageError, match="analyze.fallback 'refund_rules': unknown capability 'refund_rules': describe it"):
        build_plan(report(), config(fallback=["refund_rules"]))


def test_a_capability_without_blueprint_or_llm_is_left_out_and_nothing_built_fails_the_stage(tmp_path: Path) -> None:
    cfg = parse_config({"model": "m", "run_dir": str(tmp_path / "run"), "targets": [{"name": "tau2-airline"}]})
    plan = [{"name": "refund_rules", "description": "Looks up refund rules", "target": "tau2-retail"}]
    notes: list[str] = []
    ctx = StageContext(config=cfg, run_dir=tmp_path / "run", folder=tmp_path / "run" / "build", inputs={"analyze": Handoff(value={"plan": plan})},
                       resume=False, note=notes.append)  # fmt: skip
    ctx.folder.mkdir(parents=True)
    with pytest.raises(StageError, match=r"no env was built \(no built-in blueprint for 'refund_rules' and no LLM configured"):
        BuildStage().run(ctx)
    assert notes and notes[0].startswith("build: refund_rules was not built")


def test_reduced_gate_settings_are_stated_against_the_defaults() -> None:
    from schemas.validation import ValidationConfig

    defaults = ValidationConfig()
    reduced = {"solvability_seeds": 8, "fuzz_examples": defaults.fuzz_examples}
    assert reduced_gate(reduced) == {"solvability_seeds": f"8 (default {defaults.solvability_seeds})"}


def test_an_env_that_cannot_be_trained_is_left_out_and_nothing_trained_fails_the_stage(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    from factory.pipeline.stages.train import TrainStage

    cfg = parse_config({"model": str(tmp_path / "no-model"), "run_dir": str(tmp_path / "run"), "targets": [{"name": "tau2-airline"}]})
    envs = {name: {"gym_id": f"trace/{name}-v0", "version": 0, "target": "tau2-airline", "source_sha256": "0" * 64}
            for name in ("first_cap", "second_cap")}
    notes: list[str] = []
    ctx = StageContext(config=cfg, run_dir=tmp_path / "run", folder=tmp_path / "run" / "train", inputs={"build": Handoff(value={"envs": envs})},
                       resume=False, note=notes.append)  # fmt: skip
    ctx.folder.mkdir(parents=True)
    with pytest.raises(StageError, match=r"no adapter was trained \(.*no-model.*\)"):
        TrainStage().run(ctx)
    assert [n.split(" (")[0] for n in notes] == ["train: first_cap was not trained", "train: second_cap was not trained"]


def test_a_handoff_edited_by_hand_is_one_line_naming_the_stage_and_the_fix(tmp_path: Path) -> None:
    from factory.pipeline.stages.train import TrainStage

    cfg = parse_config({"model": "m", "run_dir": str(tmp_path / "run"), "targets": [{"name": "tau2-airline"}]})
    envs = {"first_cap": {"gym_id": "trace/first_cap-v0", "version": "zero", "target": "tau2-airline"}}
    ctx = StageContext(config=cfg, run_dir=tmp_path / "run", folder=tmp_path / "run" / "train", inputs={"build": Handoff(value={"envs": envs})},
                       resume=False)  # fmt: skip
    with pytest.raises(StageError) as caught:
        TrainStage().run(ctx)
    message = str(caught.value)
    assert "\n" not in message and "not a BuildOutput" in message and "factory run --force build" in message
    assert "envs.first_cap.version" in message and "envs.first_cap.source_sha256" in message


def test_typed_handoffs_store_what_the_untyped_stages_stored() -> None:
    """Runs started before the handoffs were typed keep their stage keys: the stored JSON is the same."""
    from factory.pipeline.digests import value_digest
    from factory.pipeline.handoffs import AnalyzeOutput, BuildOutput, PlannedCapability

    plan = [{"name": "precondition_verification", "description": "d", "target": "tau2-airline"}]
    typed = AnalyzeOutput(plan=[PlannedCapability(**plan[0])], labels="abc").handoff()
    assert typed.value == {"plan": plan, "labels": "abc"}
    assert typed.digest(("plan",)) == Handoff(value={"plan": plan, "labels": "abc"}).digest(("plan",))
    env = {"gym_id": "trace/x-v0", "version": 3, "target": "tau2-airline", "source_sha256": "f" * 64}
    assert value_digest(BuildOutput.model_validate({"envs": {"x": env}}).handoff().value) == value_digest({"envs": {"x": env}})


def test_a_train_record_without_adapter_folders_runs_the_stage_again(tmp_path: Path) -> None:
    """Records written before adapter folders were handed on: the train stage runs again (it finds the adapters
    finished and only rewrites its record), instead of the route stage guessing the folders."""
    from factory.pipeline.stages.train import TrainStage

    old = Handoff(value={"adapters": {"x": "d"}})
    assert TrainStage().check(old, tmp_path) == "its record does not name the adapter folders"
    new = Handoff(value={"adapters": {"x": "d"}, "paths": {"x": "train/x/adapter"}})
    assert TrainStage().check(new, tmp_path) is None
