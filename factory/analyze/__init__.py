"""Capability analysis (TRACE step 2): import trajectories, propose and label capabilities, and select the
ones whose absence explains failures (``factory analyze``).

Modules, one job each: ``importers`` (τ²-bench, τ-bench, JSONL -> Trajectory), ``gold`` (tasks' gold
actions), ``catalogue`` (built-in capabilities), ``discovery`` (LLM proposes capabilities), ``labeling``
(LLM labels, N runs), ``offline`` (rule-based labeler), ``stats`` (ER±, Δ, coverage, K of N, bootstrap,
overlap), ``pipeline`` (end to end), ``report`` and ``charts`` (outputs), ``injection`` (synthetic τ²
trajectories with known deficits), ``command`` (the CLI).
"""

from factory.analyze.catalogue import BUILTIN_CAPABILITIES, PAPER_CAPABILITIES, builtin_capabilities
from factory.analyze.errors import AnalyzeInputError, TrajectoryFormatError
from factory.analyze.gold import GoldAction, GoldIndex, load_tasks
from factory.analyze.importers import ImportResult, load_trajectories, write_jsonl
from factory.analyze.offline import OfflineLabeler
from factory.analyze.pipeline import AnalysisResult, AnalyzeConfig, analyze
from factory.analyze.stats import LabelMatrix, capability_statistics

__all__ = [
    "AnalysisResult",
    "AnalyzeConfig",
    "AnalyzeInputError",
    "BUILTIN_CAPABILITIES",
    "GoldAction",
    "GoldIndex",
    "ImportResult",
    "LabelMatrix",
    "OfflineLabeler",
    "PAPER_CAPABILITIES",
    "TrajectoryFormatError",
    "analyze",
    "builtin_capabilities",
    "capability_statistics",
    "load_tasks",
    "load_trajectories",
    "write_jsonl",
]
