"""Capability analysis (TRACE step 2): import trajectories, propose and label capabilities, and select the
ones whose absence explains failures (``factory analyze``).

Modules, one job each: ``importers`` with ``format_tau2`` and ``format_tau_bench`` (files -> Trajectory),
``tasks`` (task specs: instructions, gold, versions), ``revisions`` (which task version a run used, and
whether the benchmark corrected it since), ``attribution`` (failures that are not the agent's fault),
``world`` and ``policy_*`` (what the agent saw and what the domain policy allows), ``offline`` (the rule
labeler), ``catalogue`` (built-in capabilities), ``discovery`` / ``labeling`` (LLM), ``stats`` (ER±, Δ,
coverage, bootstrap), ``pipeline`` (end to end), ``report`` and ``charts`` (outputs).
"""

from factory.analyze.catalogue import BUILTIN_CAPABILITIES, PAPER_CAPABILITIES, builtin_capabilities
from factory.analyze.errors import AnalyzeInputError, TrajectoryFormatError
from factory.analyze.importers import ImportResult, load_trajectories, write_jsonl
from factory.analyze.tasks import GoldAction, TaskIndex, TaskSpec, load_tasks

__all__ = [
    "BUILTIN_CAPABILITIES",
    "PAPER_CAPABILITIES",
    "AnalyzeInputError",
    "GoldAction",
    "ImportResult",
    "TaskIndex",
    "TaskSpec",
    "TrajectoryFormatError",
    "builtin_capabilities",
    "load_tasks",
    "load_trajectories",
    "write_jsonl",
]
