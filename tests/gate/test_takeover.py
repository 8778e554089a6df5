"""Code execution inside the env's process through library machinery (issue 32): a lint-clean env whose module, as
it loads, runs code of its own choosing through ``dataclasses`` (which pastes a field's name into the source of
the ``__eq__`` it compiles and executes) and rewrites the grading engine of its process (``trace_env.engine``)
so that an episode that skipped the capability is paid 1.0.

The lint is a quality filter and passes it; the sandbox holds (nothing leaves the env's own process). What keeps
it from a verdict or a training reward: the gate plays every episode as training does, in a fresh process that
has loaded the module, so the rewritten grading pays the gate's skipping agent too and the default gate fails the
env with a seed (this file); an env that does it only on some episodes is caught by the reward audit
(tests/trainer/test_audit_takeover.py).
"""

from __future__ import annotations

import pytest

from factory.validation.gate import Gate, validate_source
from factory.validation.static import check_source
from sandbox import available_backends
from schemas.validation import ValidationConfig
from tests.gate.defects import Defect
from tests.trainer.hostile import takeover

SANDBOXED = [name for name in ("bwrap", "docker") if available_backends().get(name) is None]
pytestmark = pytest.mark.skipif(not SANDBOXED, reason=f"no sandbox backend available: {available_backends()}")
BACKEND = SANDBOXED[0] if SANDBOXED else "bwrap"

IMPORT = "from env_registry import sdk\n"
# The takeover block (tests/trainer/hostile.py): the rewritten grading pays 1.0 to an episode that cancelled
# without looking the reservation up (the "verified" gate at 0.4), on every episode.
TAKEOVER = IMPORT + takeover('graded["gates"].get("verified") == 0.4')
EVALUATE = "    def evaluate(self, episode):\n"
#: The valid desk env (tests/envs/defective/desk.py, which passes the gate) with the takeover block added.
PAYS_SKIPPING_THROUGH_DATACLASSES = Defect("capability_necessity", "rewrites the engine's grading through dataclasses",
                                           ((IMPORT, TAKEOVER), (EVALUATE, EVALUATE + "        Record() == Record()\n")),
                                           also=("exploit_search", "reward_sensitivity"))


def test_the_takeover_runs_code_and_passes_the_lint() -> None:
    """The spelling is real: in a process of its own, an episode of the skipping agent is paid 1.0 through the
    rewritten grading (0.4 by the env's own evaluate), and the engine's code is as it was after the episode."""
    import subprocess
    import sys

    source = PAYS_SKIPPING_THROUGH_DATACLASSES.source()
    assert check_source(source) == []
    probe = ("import sys; from trace_env import sdk; from trace_env.engine import run_episode; "
             "from trace_env.loader import load_env; env = load_env(sys.stdin.read()); honest = sdk.Reward.to_dict; "
             "s = env.generate(5); paid = run_episode(env, 5, env.capability_skipping_solution(s))['reward']; "
             "print(paid, sdk.Reward.to_dict is honest)")
    done = subprocess.run([sys.executable, "-c", probe], input=source, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.split() == ["1.0", "True"], (done.stdout, done.stderr[-2000:])


def test_the_default_gate_fails_an_env_that_rewrites_its_grading() -> None:
    source = PAYS_SKIPPING_THROUGH_DATACLASSES.source()
    report = validate_source(source, Gate(config=ValidationConfig(run_seed=3), backend=BACKEND))
    failed = {c.name: c for c in report.failures() if not c.inconclusive}
    assert report.status == "failed", [(c.name, c.message[:200]) for c in report.checks]
    assert report.env_info is not None and report.env_info["capability"] == "refund_eligibility"
    check = failed.get("capability_necessity") or failed.get("exploit_search")
    assert check is not None, sorted(failed)
    example = check.counterexample
    assert example is not None and str(example.seed) in check.message, check.message
    assert example.reward is not None and example.reward >= 0.99  # paid in full: the honest desk pays a skipper <= 0.4
