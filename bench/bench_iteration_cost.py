"""What one GRPO iteration costs, old path against new path, measured in ONE process on the same rollouts.

    python bench/bench_iteration_cost.py --model smollm2          # SmolLM2-135M-Instruct, 2x6 rollouts (issue 35)
    python bench/bench_iteration_cost.py --model tiny --repeats 3

The machine is shared and noisy, so a ratio between two runs means little: here both paths run in the same
process, interleaved (old, new, old, new, ...), and the ratio is of their medians. On the blueprint the
learning bench trains on (``permission_error_recovery``, family ``enable_setting_low_battery``, registered
through the gate), with the learning bench's preset for the model (groups x group size, 96 new tokens a turn,
8-turn episodes for SmolLM2), ``--warm-steps`` supervised warm-start steps first so episodes look like
training's:

* generation: the rollouts of one iteration (``collect_groups``) with the engine as it was (LoRA applied
  beside every linear layer at every decoded token) and with the adapter merged into the base weights for the
  span of the generation (``TransformersEngine(merge_adapter=True)``); seconds per generated token and per
  iteration;
* update: on ONE set of rollouts, the GRPO update with gradient checkpointing as it was (checkpointed layers
  were handed no KV cache, so every sequence ran whole) and with the shared-prefix scoring under
  checkpointing (``trainer.logprobs``), the adapter restored between the two; and without checkpointing.

Prints a table and writes OUT/cost.json; the iteration ratio is (generation + env + update) old / new.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


CPU: list[float] = []
"""CPU seconds of this process for the last timed() call: on a shared machine less disturbed by other load than wall time."""


def timed(fn):  # noqa: ANN001, ANN201
    started, cpu = time.perf_counter(), time.process_time()
    value = fn()
    CPU[:] = [time.process_time() - cpu]
    return time.perf_counter() - started, value


def main() -> None:
    import os
    import shutil

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["tiny", "smollm2"], default="smollm2")
    parser.add_argument("--capability", default="permission_error_recovery")
    parser.add_argument("--repeats", type=int, default=2, help="old/new pairs of each measurement (interleaved)")
    parser.add_argument("--warm-steps", type=int, default=None, help="supervised warm-start steps before measuring (default: the preset's)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: a second thread spin-waits on a busy machine)")
    parser.add_argument("--warmup", type=int, default=1, help="old/new pairs run first and not counted (first-call costs)")
    parser.add_argument("--out", type=Path, default=REPO / "bench-out" / "iteration-cost")
    args = parser.parse_args()

    import torch

    from bench.bench_learning import PRESETS, model_settings, register
    from trainer.config import load_config
    from trainer.engines import TransformersEngine
    from trainer.logprobs import TokenLogProbs
    from trainer.loop import GRPORun
    from trainer.model import mode, trainable_parameters
    from trainer.rollout import collect_groups
    from trainer.update import PolicyUpdate, build_items

    preset = PRESETS[args.model]
    registry = Path(tempfile.mkdtemp(prefix="bench-cost-registry-"))
    os.environ["TRACE_FACTORY_REGISTRY"] = str(registry)
    out = args.out / args.model
    run_dir = Path(tempfile.mkdtemp(prefix="bench-cost-run-"))
    try:
        env_id = register(args.capability, registry)
        warm = preset["warm_steps"] if args.warm_steps is None else args.warm_steps
        settings = [
            f"threads={args.threads}", "sandbox='bwrap'", "seed=0", f"grpo.groups={preset['groups']}",
            f"grpo.group_size={preset['group_size']}", f"grpo.lr={preset['lr']}", "grpo.micro_batch_size=4",
            f"lora.rank={preset['lora_rank']}", f"lora.alpha={preset['lora_rank']}", f"rollout.temperature={preset['temperature']}",
            f"rollout.max_new_tokens={preset['max_new_tokens']}", "rollout.max_seq_len=4096", "rollout.compact_tools=true",
            f"warm_start.steps={warm}", f"warm_start.lr={preset['warm_lr']}", f"warm_start.batch_size={preset['warm_batch']}",
            f"warm_start.seeds={preset['warm_seeds']}", "warm_start.source='skipping'", "heldout.seeds=0",
            f"variants={json.dumps([preset['variants']])}", "grpo.gradient_checkpointing=true",
            *([f"rollout.max_steps={preset['max_steps']}"] if preset["max_steps"] else []),
        ]
        config = load_config(None, settings, output_dir=str(run_dir), **model_settings(args.model), **{"grpo.iterations": 1})
        run = GRPORun(env_id, config)
        run.setup()
        warm_s, _ = timed(run.warm_start)
        print(f"{env_id}: {args.model}, warm start {warm} steps in {warm_s:.0f} s", flush=True)
        c = config
        seeds = run.window("grpo", c.grpo.groups)
        engines = {"old": TransformersEngine(run.policy, run.chat, c.rollout.temperature, c.rollout.max_new_tokens),
                   "new": TransformersEngine(run.policy, run.chat, c.rollout.temperature, c.rollout.max_new_tokens, merge_adapter=True)}
        generation: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
        kept = None
        for repeat in range(args.warmup + args.repeats):
            for name in ("old", "new"):
                torch.manual_seed(repeat)
                with mode(run.policy, False):
                    wall, (rollouts, stats) = timed(lambda: collect_groups(engines[name], run.chat, run.pool, seeds, c.grpo.group_size, c.rollout))
                row = {"wall": wall, "cpu": CPU[0], "generation": stats.generation_seconds, "env": stats.env_seconds,
                       "tokens": stats.generated_tokens, "s_per_token": stats.generation_seconds / max(1, stats.generated_tokens),
                       "cpu_per_token": CPU[0] / max(1, stats.generated_tokens)}
                if repeat >= args.warmup:
                    generation[name].append(row)
                print(f"  rollouts ({name}{', warm-up' if repeat < args.warmup else ''}): {wall:.1f} s ({CPU[0]:.1f} s CPU), generation "
                      f"{stats.generation_seconds:.1f} s for {stats.generated_tokens} tokens, env {stats.env_seconds:.1f} s", flush=True)
                kept = kept or rollouts
        assert kept is not None
        items, _, _ = build_items(kept, c.grpo)
        if not items:  # every group flat: give the rollouts advantages anyway, the cost is what is measured
            from trainer.update import Item

            items = [Item(*r.sequence(), advantage=(1.0 if i % 2 else -1.0)) for i, r in enumerate(kept) if r.trainable]
        saved = [p.detach().clone() for p in trainable_parameters(run.policy)]
        decoder_layers = [m for m in run.policy.modules() if hasattr(m, "_can_checkpoint_with_cache")]

        def update(share: bool, checkpointing: bool) -> float:
            for p, value in zip(trainable_parameters(run.policy), saved):
                p.data.copy_(value)
            for layer in decoder_layers:
                layer.gradient_checkpointing = checkpointing
            module = TokenLogProbs(run.policy, c.grpo.logprob_chunk, c.rollout.temperature)
            optimizer = torch.optim.AdamW(trainable_parameters(run.policy), lr=c.grpo.lr)
            policy_update = PolicyUpdate(run.accelerator, module, optimizer, c.grpo, run.chat.pad_id, share_prefix=share)
            with mode(run.policy, True):
                seconds, _ = timed(lambda: policy_update.grpo(items, items[0]))
            return seconds

        arms = {"old": (False, True), "new": (True, True), "new, no checkpointing": (True, False)}
        updates: dict[str, list[float]] = {name: [] for name in arms}
        update_cpu: dict[str, list[float]] = {name: [] for name in arms}
        for repeat in range(args.warmup + args.repeats):
            for name, (share, checkpointing) in arms.items():
                seconds = update(share, checkpointing)
                if repeat >= args.warmup:
                    updates[name].append(seconds)
                    update_cpu[name].append(CPU[0])
                print(f"  update ({name}{', warm-up' if repeat < args.warmup else ''}): {seconds:.1f} s ({CPU[0]:.1f} s CPU) "
                      f"on {len(items)} trajectories", flush=True)
        med = statistics.median
        env_s = med([g["env"] for arm in generation.values() for g in arm])
        tokens = med([g["tokens"] for g in generation["old"]])
        gen = {name: med([g["s_per_token"] for g in generation[name]]) * tokens for name in generation}
        iteration = {name: gen[name] + env_s + med(updates[name]) for name in ("old", "new")}
        gen_cpu = {name: med([g["cpu_per_token"] for g in generation[name]]) * tokens for name in generation}
        iteration_cpu = {name: gen_cpu[name] + med(update_cpu[name]) for name in ("old", "new")}
        figures = {
            "model": args.model, "env_id": env_id, "rollouts": f"{c.grpo.groups}x{c.grpo.group_size}", "repeats": args.repeats,
            "tokens_per_iteration": tokens, "generation_s": gen, "env_s": env_s,
            "s_per_token": {n: med([g["s_per_token"] for g in generation[n]]) for n in generation},
            "update_s": {n: med(v) for n, v in updates.items()}, "iteration_s": iteration,
            "iteration_ratio": iteration["old"] / iteration["new"],
            "generation_ratio": gen["old"] / gen["new"], "update_ratio": med(updates["old"]) / med(updates["new"]),
            "trajectories": len(items), "trained_tokens": sum(sum(i.mask) for i in items),
            "cpu": {"generation_s": gen_cpu, "update_s": {n: med(v) for n, v in update_cpu.items()}, "iteration_s": iteration_cpu,
                    "iteration_ratio": iteration_cpu["old"] / iteration_cpu["new"], "generation_ratio": gen_cpu["old"] / gen_cpu["new"],
                    "update_ratio": med(update_cpu["old"]) / med(update_cpu["new"])},
            "raw": {"generation": generation, "updates": updates, "update_cpu": update_cpu},
        }
        out.mkdir(parents=True, exist_ok=True)
        (out / "cost.json").write_text(json.dumps(figures, indent=2) + "\n")
        print(f"\n{args.model}, {figures['rollouts']} rollouts, {tokens:.0f} generated tokens an iteration (medians of {args.repeats}):")
        print(f"  generation  old {gen['old']:.1f} s  new {gen['new']:.1f} s  ratio {figures['generation_ratio']:.2f}x (adapter merged while generating)")
        print(f"  update      old {figures['update_s']['old']:.1f} s  new {figures['update_s']['new']:.1f} s  ratio "
              f"{figures['update_ratio']:.2f}x (shared prefix under checkpointing); without checkpointing {figures['update_s']['new, no checkpointing']:.1f} s")
        print(f"  env         {env_s:.1f} s (both)")
        print(f"  iteration   old {iteration['old']:.1f} s  new {iteration['new']:.1f} s  ratio {figures['iteration_ratio']:.2f}x (wall)")
        cpu = figures["cpu"]
        print(f"  CPU seconds (this process): generation {cpu['generation_ratio']:.2f}x, update {cpu['update_ratio']:.2f}x, "
              f"iteration (generation + update) old {iteration_cpu['old']:.1f} s  new {iteration_cpu['new']:.1f} s  "
              f"ratio {cpu['iteration_ratio']:.2f}x")
        run.close()
    finally:
        shutil.rmtree(registry, ignore_errors=True)
        shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
