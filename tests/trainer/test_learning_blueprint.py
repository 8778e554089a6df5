"""CI guard: a shipped blueprint capability learnt by the tiny model, judged on held-out seeds (issue 35, item 7).

``permission_error_recovery`` on its ``enable_setting_low_battery`` family ("turn wifi / cellular / location
on" while low battery mode blocks it: read the error, switch low battery mode off, retry, say what changed),
compact tools, as ``bench/bench_learning.py --model tiny`` trains it, cut to CI size. The blueprint is
registered without the gate (``Registry.put`` + ``register_all`` into the trainer tests' temporary registry,
as ``bench/bench_audit.py`` does): the gate is tested elsewhere and would cost a minute here.

The warm start is short (240 steps of 2 episodes, 30% reference, the rest capability-skipping): it teaches
the tools and the format but not the recovery; the greedy reward on 16 held-out seeds of the family (never
trained on) before the first GRPO iteration is the baseline. Three GRPO iterations (4 seeds x 6 rollouts,
lr 3e-4) must then raise it clearly. One torch thread and fixed seeds: the figures repeat exactly here.

Measured here (2 CPU cores, load average 5-18 from other work, CPU torch, one thread): held-out 0.057
[0.011, 0.102] -> 0.273 [0.085, 0.500] after 3 iterations (4 of 16 seeds fully solved), training reward
0.09, 0.10, 0.03; the whole test 263 s at load average ~9 (2 min 12 s of CPU: warm start 154 s,
iterations 10-22 s, held-out 3-6 s). With the update switched off (``grpo.lr=1e-30``)
held-out stays at 0.057 and the test fails. Past 3 iterations this preset is not stable (held-out 0.170
after 6, training reward 0.05, 0.01 in iterations 5-6), so the guard stops at 3; with
160 warm-start steps it did not learn (0.057 -> 0.045 after 3), so the warm start is not cut further; the bench's longer warm
start (``bench/bench_learning.py --model tiny``) learns the family fully.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.config import load_config
from trainer.loop import GRPORun

FAMILY = "enable_setting_low_battery"
SETTINGS = [
    "threads=1", "sandbox='bwrap'", "seed=0", "grpo.groups=4", "grpo.group_size=6", "grpo.lr=3e-4",
    "grpo.micro_batch_size=4", "lora.rank=128", "lora.alpha=128", "rollout.temperature=0.7", "rollout.max_new_tokens=64",
    "rollout.max_seq_len=4096", "rollout.compact_tools=true", "rollout.merge_adapter=true", "warm_start.steps=240",
    "warm_start.lr=3e-3", "warm_start.batch_size=2", "warm_start.seeds=128", "warm_start.reference_share=0.3",
    "heldout.seeds=16", "heldout.every=3", "save_every=1000", "audit.share=0", f"variants={json.dumps([FAMILY])}",
]
ITERATIONS = 3
BASELINE_AT_MOST, GAIN_AT_LEAST, LAST_AT_LEAST = 0.12, 0.12, 0.2


@pytest.fixture(scope="module")
def blueprint_env(trainer_registry: Path) -> str:
    """trace/permission_error_recovery-v0 from its shipped blueprint, registered without the gate."""
    from env_registry.registration import register_all
    from env_registry.registry import Registry
    from factory.blueprints import blueprint_source
    from trace_env.loader import load_env

    source = blueprint_source("permission_error_recovery")
    env = load_env(source)
    manifest, _ = Registry(trainer_registry).put(source, capability=env.capability, target=env.target, tools=env.tools(),
                                                 max_steps=env.max_steps)
    register_all(trainer_registry)
    return manifest.gym_id


def train(folder: Path, env_id: str, model: Path, extra: list[str] = ()) -> GRPORun:
    config = load_config(None, [*SETTINGS, *extra], model=str(model), output_dir=str(folder),
                         **{"grpo.iterations": ITERATIONS})
    run = GRPORun(env_id, config)
    run.train()
    return run


@pytest.mark.learning
def test_grpo_teaches_the_tiny_model_to_recover_from_the_blocked_setting_on_held_out_seeds(
        tmp_path: Path, blueprint_env: str, learnable_model: Path) -> None:
    run = train(tmp_path / "run", blueprint_env, learnable_model)
    grpo = [r for r in run.rows if r.phase == "grpo"]
    held = [r for r in run.rows if r.phase == "heldout"]
    print("training reward:", " ".join(f"{r.reward_mean:.2f}" for r in grpo if r.reward_mean is not None))
    print("held-out:", [(r.iteration, round(r.reward_mean or 0, 3), round(r.reward_low or 0, 3), round(r.reward_high or 0, 3))
                        for r in held])
    print("seconds: warm start", round(sum(r.seconds for r in run.rows if r.phase == "warm_start")),
          "grpo", [round(r.seconds) for r in grpo], "held-out", [round(r.seconds) for r in held])
    assert len(grpo) == ITERATIONS and all(r.infrastructure_errors == 0 and not r.incomplete for r in grpo)
    assert sum(1 for r in grpo if r.trained_rollouts > 0) >= ITERATIONS - 1  # updates really happened
    assert [r.iteration for r in held][0] == 0 and held[-1].iteration == ITERATIONS
    assert all(r.valid_rollouts == 16 for r in held)  # every held-out mean stands on all its seeds
    first, last = held[0].reward_mean, held[-1].reward_mean
    assert first is not None and last is not None
    assert first <= BASELINE_AT_MOST, f"the warm start already shows the capability: held-out {first:.3f}"
    assert last >= first + GAIN_AT_LEAST and last >= LAST_AT_LEAST, f"no held-out gain: {first:.3f} -> {last:.3f}"
