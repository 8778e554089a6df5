"""The stage runner's bookkeeping with three small stages: what is skipped, resumed or run again, and why.

Stage ``a`` hands on its config value divided by 10, so two values in the same decade hand on the same
output: that is how the tests tell "its config changed" from "what it hands on changed".
"""

from __future__ import annotations

import hashlib
import json
from operator import attrgetter
from pathlib import Path
from typing import Any

import pytest

from schemas.errors import FactoryError
from factory.pipeline.config import parse_config
from factory.pipeline.runner import Hooks, plan, run_pipeline
from factory.pipeline.stages.base import Stage, StageContext, StageError
from factory.pipeline.state import Handoff, StateStore


class Toy(Stage):
    def __init__(self, name: str, needs: dict[str, Any], read: str, log: list[tuple[str, bool]]) -> None:
        self.name = name  # type: ignore[misc]
        self.needs = needs  # type: ignore[misc]
        self.read = read
        self.log = log
        self.fail_next: BaseException | None = None

    def section(self, config: Any) -> Any:
        return {"value": attrgetter(self.read)(config)}

    def run(self, ctx: StageContext) -> Handoff:
        self.log.append((self.name, ctx.resume))
        partial = ctx.folder / "partial.txt"
        if self.fail_next is not None:
            partial.write_text("half of the work")
            error, self.fail_next = self.fail_next, None
            raise error
        value = self.section(ctx.config)["value"]
        upstream = "".join(ctx.inputs[n].value["out"] for n in self.needs)
        out = f"{upstream}{self.name}{int(value) // 10}|"
        path = ctx.folder / "out.txt"
        path.write_text(out)
        return Handoff(value={"out": out}, files={ctx.rel(path): hashlib.sha256(out.encode()).hexdigest()},
                       info={"resumed_with_partial": partial.exists()})


def config(tmp_path: Path, a: int = 3, b: int = 20, c: int = 30) -> Any:
    return parse_config({
        "run_dir": str(tmp_path / "run"), "model": "m", "targets": [{"name": "tau2-airline"}],
        "rollouts": {"max_steps": a}, "eval": {"max_steps": c}, "analyze": {"bootstrap": b},
    })  # fmt: skip


@pytest.fixture
def stages() -> tuple[list[Toy], list[tuple[str, bool]]]:
    log: list[tuple[str, bool]] = []
    return [
        Toy("a", {}, "rollouts.max_steps", log),
        Toy("b", {"a": None}, "analyze.bootstrap", log),
        Toy("c", {"b": ("out",)}, "eval.max_steps", log),
    ], log


def run(cfg: Any, stages: list[Toy], **kwargs: Any) -> dict[str, str]:
    result = run_pipeline(cfg, stages, **kwargs)
    return {o.stage: o.action for o in result.outcomes}


def test_a_finished_run_is_all_cached(tmp_path: Path, stages) -> None:
    toys, log = stages
    assert run(config(tmp_path), toys) == {"a": "ran", "b": "ran", "c": "ran"}
    assert run(config(tmp_path), toys) == {"a": "cached", "b": "cached", "c": "cached"}
    assert [name for name, _ in log] == ["a", "b", "c"]
    assert (tmp_path / "run" / "c" / "out.txt").read_text() == "a0|b2|c3|"  # each stage read the one before


def test_a_changed_section_reruns_its_stage_and_later_ones_only_if_its_output_changed(tmp_path: Path, stages) -> None:
    toys, log = stages
    run(config(tmp_path), toys)
    assert run(config(tmp_path, c=31), toys) == {"a": "cached", "b": "cached", "c": "ran"}
    assert run(config(tmp_path, a=4, c=31), toys) == {"a": "ran", "b": "cached", "c": "cached"}  # same decade: same output
    assert run(config(tmp_path, a=14, c=31), toys) == {"a": "ran", "b": "ran", "c": "ran"}
    assert (tmp_path / "run" / "c" / "out.txt").read_text() == "a1|b2|c3|"
    state = StateStore(tmp_path / "run").load()
    whys = [(e.stage, e.why) for e in state.history if e.action == "ran"][-3:]
    assert whys == [("a", "its config section changed"), ("b", "a's output changed"), ("c", "b's output changed")]


def test_a_stage_reads_only_the_parts_it_needs(tmp_path: Path, stages) -> None:
    toys, _ = stages
    run(config(tmp_path), toys)
    record = StateStore(tmp_path / "run").load().stages["b"]
    assert set(record.parts) == {"section", "a"}


def test_an_interrupted_stage_resumes_in_place_and_earlier_ones_are_not_rerun(tmp_path: Path, stages) -> None:
    toys, log = stages
    toys[1].fail_next = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(config(tmp_path), toys)
    state = StateStore(tmp_path / "run").load()
    assert state.stages["a"].status == "done" and state.stages["b"].status == "running" and "c" not in state.stages
    steps = {s.stage: (s.action, s.why) for s in plan(config(tmp_path), state, toys)}
    assert steps == {"a": ("cached", "nothing it depends on changed"), "b": ("resume", "interrupted last time"), "c": ("later", "after the stages before it")}
    assert run(config(tmp_path), toys) == {"a": "cached", "b": "resumed", "c": "ran"}
    assert log == [("a", False), ("b", False), ("b", True), ("c", False)]
    done = StateStore(tmp_path / "run").load().stages["b"]
    assert done.attempts == 2 and done.handoff is not None and done.handoff.info["resumed_with_partial"]


def test_a_failed_stage_records_why_and_resumes(tmp_path: Path, stages) -> None:
    toys, _ = stages
    toys[2].fail_next = StageError("the sandbox is down")
    with pytest.raises(StageError):
        run_pipeline(config(tmp_path), toys)
    record = StateStore(tmp_path / "run").load().stages["c"]
    assert record.status == "failed" and record.error == "the sandbox is down"
    assert run(config(tmp_path), toys) == {"a": "cached", "b": "cached", "c": "resumed"}


def test_a_stage_whose_output_was_removed_or_edited_runs_again(tmp_path: Path, stages) -> None:
    toys, _ = stages
    run(config(tmp_path), toys)
    (tmp_path / "run" / "a" / "out.txt").unlink()
    assert run(config(tmp_path), toys) == {"a": "ran", "b": "cached", "c": "cached"}
    (tmp_path / "run" / "b" / "out.txt").write_text("edited")
    assert run(config(tmp_path), toys) == {"a": "cached", "b": "ran", "c": "cached"}
    events = [(e.stage, e.why) for e in StateStore(tmp_path / "run").load().history if e.action == "ran"]
    assert events[-2:] == [("a", "a/out.txt is missing"), ("b", "b/out.txt changed since the stage finished")]


def test_force_until_and_hooks(tmp_path: Path, stages) -> None:
    toys, _ = stages
    seen: list[str] = []
    result = run_pipeline(config(tmp_path), toys, until="b", hooks=Hooks(step=lambda s: seen.append(f"{s.stage}:{s.action}")))
    assert result.stopped_after == "b" and [o.stage for o in result.outcomes] == ["a", "b"] and seen == ["a:run", "b:run"]
    assert run(config(tmp_path), toys, force=["a"]) == {"a": "ran", "b": "cached", "c": "ran"}


def test_report_is_written_after_the_last_stage(tmp_path: Path, stages) -> None:
    toys, _ = stages
    written = []
    result = run_pipeline(config(tmp_path), toys, report=lambda cfg, state: written.append(sorted(state.stages)) or "report.md")
    assert result.report == "report.md" and written == [["a", "b", "c"]]


def test_two_runs_cannot_share_a_folder(tmp_path: Path) -> None:
    with StateStore(tmp_path / "run"):
        with pytest.raises(FactoryError, match="another `factory run` is using"):
            StateStore(tmp_path / "run").__enter__()


def test_an_unreadable_state_file_is_one_line(tmp_path: Path, stages) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "pipeline.json").write_text("{not json")
    with pytest.raises(FactoryError, match=r"pipeline.json is damaged \(\(top level\): Invalid JSON: .*\); remove it to run every stage again"):
        run_pipeline(config(tmp_path), stages[0])


@pytest.mark.parametrize(
    "error, code, message",
    [
        (KeyboardInterrupt(), 130, "interrupted during b; run the same command again to resume there"),
        (StageError("no env passed the gate"), 1, "b failed: no env passed the gate (finished stages are kept; fix and run again)"),
    ],
)
def test_the_command_ends_an_interrupted_or_failed_stage_in_one_line(
    error: BaseException, code: int, message: str, tmp_path: Path, stages, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    import factory.pipeline.stages as registry
    from factory.cli import app

    toys, _ = stages
    toys[1].fail_next = error
    monkeypatch.setattr(registry, "STAGES", toys)
    path = tmp_path / "pipeline.toml"
    path.write_text('model = "tiny"\n[[targets]]\nname = "tau2-airline"\n')  # "tiny": the model preflight needs no hub
    result = CliRunner().invoke(app, ["run", "--config", str(path), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == code and result.output.strip().splitlines()[-1] == f"error: {message}"
    assert StateStore(tmp_path / "run").load().stages["b"].status == ("running" if code == 130 else "failed")
    again = CliRunner().invoke(app, ["run", "--config", str(path), "--run-dir", str(tmp_path / "run"), "--json"])
    assert again.exit_code == 0, again.output
    assert [(o["stage"], o["action"]) for o in json.loads(again.stdout)["outcomes"]] == [("a", "cached"), ("b", "resumed"), ("c", "ran")]
