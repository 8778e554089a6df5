"""Which stages run, in order: a finished stage whose key still matches is skipped, an interrupted one is
resumed in place, and any other is run from a clean folder. After every stage the state is saved, so a
run killed at any point resumes at the stage it was in.

A stage's key digests its config section and, for each upstream stage it needs, the digest of the parts
of that stage's handoff it reads. So a changed config section re-runs its stage; the stages after it run
again only if what it hands on changed.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from factory.pipeline.config import PipelineConfig
from factory.pipeline.digests import value_digest
from factory.pipeline.stages.base import Progress, Stage, StageContext
from factory.pipeline.state import Event, PipelineState, StageRecord, StateStore, now
from schemas.errors import one_line

Action = Literal["run", "resume", "cached", "later"]


class Step(BaseModel):
    """What a run will do (or did) with one stage, and why."""

    stage: str
    action: Action
    why: str
    key: str | None = None


class Outcome(BaseModel):
    stage: str
    action: Literal["ran", "resumed", "cached"]
    seconds: float
    why: str


class RunResult(BaseModel):
    run_dir: str
    outcomes: list[Outcome]
    report: str | None = None
    stopped_after: str | None = None


class Hooks:
    """What a caller sees of a run (the CLI draws bars and lines from these)."""

    def __init__(self, progress: Progress | None = None, note: Callable[[str], None] | None = None,
                 step: Callable[[Step], None] | None = None, done: Callable[[Outcome], None] | None = None) -> None:  # fmt: skip
        self.progress = progress or (lambda label, done, total: None)
        self.note = note or (lambda text: None)
        self.step = step or (lambda s: None)
        self.done = done or (lambda o: None)


def stage_key(stage: Stage, config: PipelineConfig, state: PipelineState) -> tuple[str, dict[str, str]] | None:
    """(key, parts) for a stage whose inputs are all finished, else None. ``parts`` names what went in."""
    parts = {"section": value_digest(stage.section(config))}
    for upstream, keys in stage.needs.items():
        record = state.stages.get(upstream)
        if record is None or record.status != "done" or record.handoff is None:
            return None
        parts[upstream] = record.handoff.digest(keys)
    return value_digest({"stage": stage.name, **parts}), parts


def decide(stage: Stage, config: PipelineConfig, state: PipelineState, run_dir: Path, forced: bool) -> Step:
    computed = stage_key(stage, config, state)
    if computed is None:
        return Step(stage=stage.name, action="later", why="after the stages before it")
    key, parts = computed
    record = state.stages.get(stage.name)
    if forced:
        return Step(stage=stage.name, action="run", why="forced (--force)", key=key)
    if record is None:
        return Step(stage=stage.name, action="run", why="never ran", key=key)
    if record.key != key:
        return Step(stage=stage.name, action="run", why=changed(record, parts), key=key)
    if record.status in ("running", "failed"):
        why = "interrupted last time" if record.status == "running" else f"failed last time ({record.error or 'error'})"
        return Step(stage=stage.name, action="resume", why=why, key=key)
    assert record.handoff is not None
    problem = stage.check(record.handoff, run_dir)
    if problem:
        return Step(stage=stage.name, action="run", why=problem, key=key)
    return Step(stage=stage.name, action="cached", why="nothing it depends on changed", key=key)


def changed(record: StageRecord, parts: dict[str, str]) -> str:
    """Which inputs differ from the ones the stage last ran with: its config section, or an upstream output."""
    names = [name for name, digest in parts.items() if record.parts.get(name) != digest]
    if not names:
        return "its inputs changed"
    said = ["its config section" if n == "section" else f"{n}'s output" for n in names]
    return " and ".join(said) + " changed"


def plan(config: PipelineConfig, state: PipelineState, stages: Sequence[Stage], force: Sequence[str] = ()) -> list[Step]:
    """What ``run_pipeline`` would do now, without doing it (stages after one that runs: 'later')."""
    steps = []
    blocked = False
    for stage in stages:
        step = decide(stage, config, state, config.run_path(), stage.name in force)
        if blocked and step.action != "later":
            step = Step(stage=stage.name, action="later", why="decided after the stages before it run")
        blocked = blocked or step.action in ("run", "resume", "later")
        steps.append(step)
    return steps


@contextmanager
def registry_env(path: Path) -> Iterator[None]:
    """Point every registry reader (gym registration, the trainer's env pool) at the run's registry."""
    old = os.environ.get("TRACE_FACTORY_REGISTRY")
    os.environ["TRACE_FACTORY_REGISTRY"] = str(path.resolve())
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TRACE_FACTORY_REGISTRY", None)
        else:
            os.environ["TRACE_FACTORY_REGISTRY"] = old


def run_pipeline(
    config: PipelineConfig,
    stages: Sequence[Stage],
    *,
    config_file: str | None = None,
    until: str | None = None,
    force: Sequence[str] = (),
    hooks: Hooks | None = None,
    stop: threading.Event | None = None,
    report: Callable[[PipelineConfig, PipelineState], str | None] | None = None,
) -> RunResult:
    """Run the stages in order (through ``until``), skipping what is done; then write the report."""
    hooks = hooks or Hooks()
    stop = stop or threading.Event()
    run_dir = config.run_path()
    outcomes: list[Outcome] = []
    with StateStore(run_dir) as store, registry_env(config.registry_path()):
        store.state.config_file = config_file
        for stage in stages:
            step = decide(stage, config, store.state, run_dir, stage.name in force)
            hooks.step(step)
            outcomes.append(_one(stage, step, config, store, hooks, stop))
            hooks.done(outcomes[-1])
            if stage.name == until:
                return RunResult(run_dir=str(run_dir), outcomes=outcomes, stopped_after=until)
        path = report(config, store.state) if report else None
    return RunResult(run_dir=str(run_dir), outcomes=outcomes, report=path)


def _one(stage: Stage, step: Step, config: PipelineConfig, store: StateStore, hooks: Hooks, stop: threading.Event) -> Outcome:
    state, run_dir = store.state, store.run_dir
    if step.action == "cached":
        state.history.append(Event(stage=stage.name, action="cached", why=step.why))
        store.save()
        return Outcome(stage=stage.name, action="cached", seconds=0.0, why=step.why)
    assert step.key is not None and step.action in ("run", "resume")
    computed = stage_key(stage, config, state)
    assert computed is not None
    folder = run_dir / stage.name
    previous = state.stages.get(stage.name)
    resume = step.action == "resume"
    if not resume:
        shutil.rmtree(folder, ignore_errors=True)
    record = StageRecord(
        key=step.key, parts=computed[1], status="running", attempts=(previous.attempts + 1) if resume and previous else 1,
        seconds=previous.seconds if resume and previous else 0.0,
    )  # fmt: skip
    state.stages[stage.name] = record
    store.save()
    folder.mkdir(parents=True, exist_ok=True)
    inputs = {name: state.stages[name].handoff for name in stage.needs}
    ctx = StageContext(config=config, run_dir=run_dir, folder=folder, inputs=inputs, resume=resume,  # type: ignore[arg-type]
                       progress=hooks.progress, note=hooks.note, stop=stop)  # fmt: skip
    started = time.monotonic()
    try:
        handoff = stage.run(ctx)
    except BaseException as exc:
        record.seconds = round(record.seconds + time.monotonic() - started, 2)
        interrupted = isinstance(exc, KeyboardInterrupt)
        if not interrupted:
            record.status, record.error = "failed", one_line(exc)[:500]
        state.history.append(Event(stage=stage.name, action="interrupted" if interrupted else "failed", seconds=record.seconds, why=step.why))
        store.save()
        raise
    elapsed = time.monotonic() - started
    record.handoff, record.status, record.finished_at = handoff, "done", now()
    record.seconds = round(record.seconds + elapsed, 2)
    action: Literal["ran", "resumed"] = "resumed" if resume else "ran"
    state.history.append(Event(stage=stage.name, action=action, seconds=round(elapsed, 2), why=step.why))
    store.save()
    return Outcome(stage=stage.name, action=action, seconds=round(elapsed, 2), why=step.why)
