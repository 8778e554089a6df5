"""The checks of the validation gate, in the order they run. Each runs the env inside the sandbox,
through a :class:`~factory.validation.checks.context.CheckContext`.

Each check returns a :class:`~schemas.validation.CheckResult` with a figure, how many seeds and episodes
it used and, on failure, a counterexample: a seed and the actions that expose the defect (shrunk where the
defect was found by fuzzing, re-checked by replaying it before it is reported). Most checks read one shared
survey of the seeds (``trace_env.gate_probe``), so adding a check rarely adds a pass over the seeds.
"""

from __future__ import annotations

from typing import Callable

from factory.validation.checks.context import WORKER_FAILURES, BudgetExceeded, CheckContext, MachineStarved
from factory.validation.checks.contract import check_interface, check_schema_fidelity, check_world_fidelity
from factory.validation.checks.exploits import check_exploit_search
from factory.validation.checks.outcomes import check_necessity, check_reward_sensitivity, check_solvability
from factory.validation.checks.robust import check_budget, check_robustness, check_user_paths
from factory.validation.checks.signal import check_grpo_signal, check_reward_bounds
from factory.validation.checks.truth import check_paraphrase, check_stale_truth
from factory.validation.checks.variety import check_determinism, check_diversity
from schemas.validation import CheckResult

SANDBOX_CHECKS: list[tuple[str, Callable[[CheckContext], CheckResult]]] = [
    ("interface", check_interface),
    ("schema_fidelity", check_schema_fidelity),
    ("world_fidelity", check_world_fidelity),
    ("determinism", check_determinism),
    ("diversity", check_diversity),
    ("solvability", check_solvability),
    ("stale_truth", check_stale_truth),
    ("paraphrase", check_paraphrase),
    ("capability_necessity", check_necessity),
    ("reward_sensitivity", check_reward_sensitivity),
    ("exploit_search", check_exploit_search),
    ("grpo_signal", check_grpo_signal),
    ("user_paths", check_user_paths),
    ("robustness", check_robustness),
    ("reward_bounds", check_reward_bounds),
    ("budget", check_budget),
]

__all__ = ["SANDBOX_CHECKS", "WORKER_FAILURES", "BudgetExceeded", "CheckContext", "MachineStarved"]
