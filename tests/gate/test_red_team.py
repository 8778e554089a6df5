"""Red team for issue 32 (reward integrity): env modules written by an attacker who has read the gate, the fresh
processes and the audit, each meant to pass the DEFAULT gate and then pay a capability-skipping agent in training
what the gate never measured, without the reward audit noticing. The envs are built by tests/gate/red.py, each
tests/gate/envs/tiny_checked.py (which passes the gate and pays that agent at most 0.4) with one cheat added.

Each test asserts the property issue 32 asks for: the gate fails the env, or training does not pay the skipping
agent, or the audit catches it. Where that does not hold today the test is ``xfail(strict=True)`` with the hole in
its reason (preconditions raise RuntimeError, so only the property's own assertion can make it xfail).

The training side is played as GRPO plays it: ``trainer.envpool.EnvPool`` on bwrap, a fresh episode process per
reset, with the audit replaying EVERY episode on a fresh worker (share 1.0, stronger than the default 0.25), and
the agent an LLM would be: it asks the user for the reservation id, cancels without looking, says it is done.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from env_registry.audit import AuditMismatch
from factory.validation.gate import Gate, validate_source
from sandbox import available_backends
from tests.gate import red
from schemas.validation import ValidationConfig
from trainer.config import TrainConfig
from trainer.envpool import EnvPool
from trainer.seeds import window

HONEST = red.BASE
pytestmark = pytest.mark.skipif(available_backends().get("bwrap") is not None, reason="bwrap is not available")


def _turn(content: str | None = None, calls: tuple[tuple[str, dict], ...] = ()) -> dict:
    return {"content": content, "calls": [{"name": n, "arguments": a} for n, a in calls]}


def skipping_agent_in_training(source: str, seeds: list[int], registry: Path, monkeypatch: pytest.MonkeyPatch,
                               pace_s: float = 0.0, errors_ok: bool = False) -> tuple[dict[int, float], AuditMismatch | None]:
    """The asking, cancel-without-looking agent on ``seeds`` through training's pool, every episode audited;
    ``pace_s``: the agent's thinking time before its first turn (an LLM's; the audit's replay takes none)."""
    from tests.trainer.conftest import register_env_source

    monkeypatch.setenv("TRACE_FACTORY_REGISTRY", str(registry))
    env_id = register_env_source(registry, source, validate=False)
    capability = re.search(r'capability = "(\w+)"', source)
    if capability is None or capability.group(1) not in env_id:  # gym's registry is process-wide: one id per env
        raise RuntimeError(f"registered {env_id}, not the env under test")
    paid: dict[int, float] = {}
    with EnvPool(env_id, sandbox="bwrap", audit_share=1.0, audit_dir=str(registry / "audit")) as pool:
        for seed in seeds:
            [first] = pool.reset([0], [seed])
            time.sleep(pace_s)
            [asked] = pool.step([0], [_turn("What is your reservation id?")])
            if first.reply is None or asked.reply is None:
                raise RuntimeError(f"seed {seed}: {first.error or asked.error}")
            found = re.search(r"It is (\w+)\.", asked.reply.info.new_messages[-1]["content"])
            if found is None:
                raise RuntimeError(f"seed {seed}: the user did not give the reservation id")
            pool.step([0], [_turn(calls=(("cancel_reservation", {"reservation_id": found.group(1)}),))])
            [told] = pool.step([0], [_turn("Done, your reservation is cancelled.")])
            if told.reply is None or not told.reply.terminated:
                raise RuntimeError(f"seed {seed}: the episode did not end ({told.error})")
            paid[seed] = told.reply.reward
            try:
                pool.audit_check(wait=True)
            except AuditMismatch as exc:
                return paid, exc
        if pool.auditor.errors and not errors_ok:
            raise RuntimeError(f"the audit failed to replay: {pool.auditor.first_error}")
        if pool.auditor.audited != len(seeds):
            raise RuntimeError(f"{pool.auditor.audited} of {len(seeds)} episodes audited")
    return paid, None


def default_gate(source: str, run_seed: int):
    """The default gate (ValidationConfig's defaults), its run seed pinned so the verdict reproduces."""
    return validate_source(source, Gate(config=ValidationConfig(run_seed=run_seed), backend="bwrap"))


def test_the_honest_base_does_not_pay_the_skipping_agent_in_training(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: tiny_checked pays the training agent below necessity's 0.5 on the seeds the red envs cheat on."""
    paid, caught = skipping_agent_in_training(HONEST, [48, 49, 100, 159], tmp_path, monkeypatch)
    assert caught is None and max(paid.values()) <= 0.5, paid


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "hole: the gate's seeds are log-uniform over a training window past offset 16 (factory/validation/checks/seeds.py),"
    " so GRPO's default seeds 48..159 (40 iterations x 4 groups from seed 0) are ~1% of its first 128 draws, inside"
    " necessity's 10% tolerance; an env paying the skipping agent 1.0 only there passes the default gate, pays 70% of"
    " a default run's GRPO seeds, and a pure function of the seed replays identically, so no audit share sees it."
    " Fix: training's GRPO seeds from a per-run random base the env cannot predict (trainer/seeds.py), or a necessity"
    " share judged on the gate's in-window seeds drawn uniformly over training's default reach"))
def test_an_env_lenient_only_on_trainings_grpo_seeds_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = red.source("seed_density")
    config = TrainConfig()
    grpo = window(config, "grpo", config.grpo.iterations * config.grpo.groups)
    if not (grpo[0] == 0 and grpo[-1] == 159):
        raise RuntimeError(f"training's default GRPO seeds moved ({grpo[0]}..{grpo[-1]}): move the env's cheat with them")
    report = default_gate(source, run_seed=1)
    if not report.passed:
        return  # the gate caught it: the property holds
    paid, caught = skipping_agent_in_training(source, [48, 49, 100, 159], tmp_path, monkeypatch)
    assert caught is not None or max(paid.values()) <= 0.5, (
        f"passed the default gate, paid the skipping agent {paid} in training, audited every episode, not caught")


def test_an_env_lenient_to_every_skipping_agent_but_its_own_is_caught(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """asks_first pays every skipping agent but one that writes in its first turn (the env's own script). Training's
    agent asks first and is paid 1.0 (replayed alike, so the audit agrees); capability_necessity now also plays the
    skipping solution as an agent plays it (a question to the user first, text beside each call) and fails the env."""
    source = red.source("asks_first")
    paid, caught = skipping_agent_in_training(source, [0, 1, 2, 3], tmp_path, monkeypatch)
    assert caught is None and min(paid.values()) == 1.0, paid  # what training pays: the cheat is live
    report = default_gate(source, run_seed=1)
    failed = {c.name: c for c in report.failures() if not c.inconclusive}
    assert "capability_necessity" in failed, [(c.name, c.message[:200]) for c in report.failures()]
    assert "as an agent plays it" in failed["capability_necessity"].message, failed["capability_necessity"].message


def test_an_env_that_marks_the_gates_workers_from_a_gate_only_call_fails_determinism(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pid_mark: the gate's one-shot ``capability_skipping_solution`` burns thread ids until its sandbox's pid
    namespace hands out pids in [20000, 30000); the gate's later episode processes in that worker are forked there
    and the env is honest in them, while training's workers (and the audit's fresh ones) never get there, so it
    paid every cancel-without-looking agent 1.0 and the default gate passed it (seen before the fix, run seeds 1 and
    random). Determinism now replays the skipping solution too in its fresh workers driven like training (reset and
    step only, no gate-only call), where the env pays it, and fails the env, naming that transcript."""
    source = red.source("pid_mark")
    paid, caught = skipping_agent_in_training(source, [0, 1], tmp_path, monkeypatch)
    assert caught is None and min(paid.values()) == 1.0, paid  # what training pays: the cheat is live
    report = default_gate(source, run_seed=1)
    failed = {c.name: c for c in report.failures() if not c.inconclusive}
    assert report.status == "failed" and "determinism" in failed, [(c.name, c.message[:200]) for c in report.failures()]
    assert "capability-skipping transcript" in failed["determinism"].figure, failed["determinism"].figure


def test_an_env_that_fails_the_audits_replays_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """audit_dodge with OLD = 1 (a worker's second episode is old): no gate run here, the layer under test is the
    audit (an attacker sets OLD past the gate's worker ages, so the gate sees it honest). The env ends its own
    process in a fresh worker's first episode, which every replay is: a replay that fails on two fresh workers is a
    mismatch (before, it was counted as an error and no verdict, and the env escaped every audit)."""
    paid, caught = skipping_agent_in_training(red.source("audit_dodge"), [40, 41, 44, 45], tmp_path,
                                              monkeypatch, pace_s=0.6, errors_ok=True)
    if caught is None and max(paid.values()) < 1.0:
        raise RuntimeError(f"the cheat never paid: {paid}")
    assert caught is not None, f"paid the skipping agent {paid} in training, every episode audited, none caught"
    assert caught.fresh is None and "failed on 2 fresh workers" in str(caught), str(caught)


def test_an_env_that_pays_at_an_agents_pace_is_caught_by_the_audit(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """agent_pace pays the skipping agent 1.0 when its turns take longer than a script's; the audit's replay takes
    none, pays the honest reward, and the pool stops at the first audited episode (share 1.0 here; at the default
    0.25 an env cheating on every episode is caught within 11 with 95% probability)."""
    paid, caught = skipping_agent_in_training(red.source("agent_pace"), [40, 41, 44], tmp_path, monkeypatch,
                                              pace_s=1.5)
    assert caught is not None and paid[caught.seed] == 1.0 and caught.fresh != caught.recorded, (paid, caught)
