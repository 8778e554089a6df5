"""The factory: capability analysis, environment synthesis and validation, and the ``factory`` CLI.

Its verbs, for Python callers (each mirrors the CLI command of the same name)::

    import factory
    report = factory.validate(source)                         # the validation gate, in the sandbox
    built = factory.build("precondition_verification")        # blueprint -> gate -> registry
    built = factory.build_with_llm(capability, "tau2-airline", client)
    result = factory.analyze(trajectories, factory.AnalyzeConfig())

Imports are deferred, so ``import factory`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from schemas.errors import FactoryError

if TYPE_CHECKING:  # pragma: no cover
    from factory.analyze.pipeline import AnalysisResult, AnalyzeConfig
    from factory.build import BuildResult
    from schemas.validation import ValidationReport

__all__ = ["AnalyzeConfig", "FactoryError", "analyze", "build", "build_with_llm", "validate"]


def validate(source: str, **gate: Any) -> "ValidationReport":
    """Run the validation gate on env source; ``gate`` holds :class:`factory.validation.gate.Gate`'s settings
    (``config``, ``backend``, ``limits``, ``progress``, ``calibration_policy``, ``calibration``)."""
    from factory.validation.gate import Gate, validate_source

    return validate_source(source, Gate(**gate))


def build(capability: str, **options: Any) -> "BuildResult":
    """Validate the built-in blueprint for ``capability`` and register it if it passes (``gate=Gate(...)``)."""
    from factory.build import build_from_blueprint

    return build_from_blueprint(capability, **options)


def build_with_llm(*args: Any, **options: Any) -> "BuildResult":
    """Synthesise, validate and repair an env with an LLM; register it if one passes."""
    from factory.build import build_with_llm as run

    return run(*args, **options)


def analyze(*args: Any, **options: Any) -> "AnalysisResult":
    """Contrastive capability identification over trajectories (see :func:`factory.analyze.pipeline.analyze`)."""
    from factory.analyze.pipeline import analyze as run

    return run(*args, **options)


def __getattr__(name: str) -> Any:
    if name == "AnalyzeConfig":
        from factory.analyze.pipeline import AnalyzeConfig

        return AnalyzeConfig
    raise AttributeError(f"module 'factory' has no attribute {name!r}")
