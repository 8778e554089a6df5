"""``factory eval``: the base model, each adapter alone, and the routed set, on the real target (TRACE step 6).

Every arm is a ``factory rollout`` run (same engine, same output folder format, so ``factory analyze`` reads
its trajectories as they are); only the policy differs. One base model serves every arm: adapters are PEFT
adapters switched per generation, and the router reads the frozen base model with adapters disabled.

Modules: ``schema`` (what to evaluate, what comes out), ``policies`` (arms over one shared model or an
OpenAI-compatible server that serves LoRA modules), ``scores`` (τ² pass rates as the paper defines them),
``runner`` (the arms end to end, resumable), ``render`` (80-column table, Markdown) and ``charts`` (PNG).
"""

from factory.evaluate.schema import (
    ARM_BASE,
    ARM_ROUTED,
    TOOLSANDBOX_NOTE,
    ArmResult,
    DomainScore,
    EvalConfig,
    EvalError,
    EvalReport,
    EvalTarget,
)

__all__ = [
    "ARM_BASE", "ARM_ROUTED", "TOOLSANDBOX_NOTE", "ArmResult", "DomainScore", "EvalConfig", "EvalError", "EvalReport",
    "EvalTarget",
]  # fmt: skip


def run_eval(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Lazy: the runner imports the targets and, for local models, torch."""
    from factory.evaluate.runner import run_eval as run

    return run(*args, **kwargs)
