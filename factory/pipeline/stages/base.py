"""What a stage is: a name, the upstream parts it reads, its own config section, and ``run``.

``needs`` maps an upstream stage to the parts of its handoff ``value`` this stage depends on (None: all
of it), so a change upstream invalidates only the stages that read what changed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import ValidationError

from schemas.errors import FactoryError, validation_message
from factory.pipeline.config import PipelineConfig
from factory.pipeline.handoffs import StageOutput
from factory.pipeline.state import Handoff, intact

Out = TypeVar("Out", bound=StageOutput)

Progress = Callable[[str, int | None, int | None], None]
"""progress(label, done, total): a bar per label; total None while unknown."""


class StageError(FactoryError):
    """A stage could not produce its output; the message says why and what to change."""


def model_key(config: PipelineConfig) -> str:
    """What identifies the base model in stage keys: the tiny model's spec, else the name as given."""
    if config.is_tiny:
        from trainer.tiny_model import TinySpec

        return f"tiny:{TinySpec().digest()}"
    return config.model


@dataclass
class StageContext:
    config: PipelineConfig
    run_dir: Path
    folder: Path
    inputs: dict[str, Handoff]
    resume: bool
    progress: Progress = lambda label, done, total: None
    note: Callable[[str], None] = lambda text: None
    stop: threading.Event = field(default_factory=threading.Event)
    _model: str | None = None

    def model(self) -> str:
        """The base model as a loadable folder or hub id ("tiny" is built once, offline, and cached)."""
        if self._model is None:
            if self.config.is_tiny:
                from trainer.tiny_model import ensure_tiny_model

                self._model = str(ensure_tiny_model())
            else:
                self._model = self.config.model
        return self._model

    def rel(self, path: Path) -> str:
        """A path as handoffs record it: relative to the run folder when inside it."""
        try:
            return Path(path).resolve().relative_to(self.run_dir.resolve()).as_posix()
        except ValueError:
            return str(Path(path).resolve())

    def read(self, output: type[Out]) -> Out:
        """What an upstream stage handed on, validated against its model."""
        try:
            return output.model_validate(self.inputs[output.stage].value)
        except ValidationError as exc:
            raise StageError(
                f"the {output.stage} stage's record in {self.run_dir / 'pipeline.json'} is not a {output.__name__} "
                f"({validation_message(exc)}); run `factory run --force {output.stage}` to make it again"
            ) from None

    def path(self, recorded: str) -> Path:
        return Path(recorded) if Path(recorded).is_absolute() else self.run_dir / recorded


class Stage:
    name: ClassVar[str]
    needs: ClassVar[dict[str, tuple[str, ...] | None]] = {}

    def section(self, config: PipelineConfig) -> Any:
        """The config this stage's output depends on (speed-only knobs such as concurrency left out)."""
        raise NotImplementedError

    def run(self, ctx: StageContext) -> Handoff:
        raise NotImplementedError

    def check(self, handoff: Handoff, run_dir: Path) -> str | None:
        """None when a finished stage's output is still there as it was, else what changed."""
        return intact(handoff, run_dir)
