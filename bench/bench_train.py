"""Seconds per GRPO iteration: trace-factory's own update loop vs TRL's GRPOTrainer, in one run.

    python bench/bench_train.py [--iterations 6] [--groups 4] [--group-size 8] [--json out.json]

Same model (a 128-dim tiny Qwen3), same warm-started adapter, same env (tests/envs/wifi_on.py in
bwrap sandboxes), same G x K batch, lr, clip, temperature and max new tokens, and the same rollouts engine:
TRL runs our multi-turn rollouts inside its ``rollout_func`` (the hybrid the issue describes), so the
difference is the update and the trainer around it. Prints s/iteration, generated tokens/s and the share
of iteration time spent waiting on the sandboxed envs, and the ratios TRL / ours. The first iteration of
each is a warm-up and is left out of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def register_env(root: Path) -> str:
    from env_registry.registration import register_all
    from env_registry.registry import Registry
    from trace_env.loader import load_env

    source = (REPO / "tests" / "envs" / "wifi_on.py").read_text()
    env = load_env(source)
    manifest, _ = Registry(root).put(source, capability=env.capability, target=env.target, tools=env.tools(), max_steps=env.max_steps)
    register_all(root)
    return manifest.gym_id


def ours(env_id: str, settings, iterations: int, adapter_dir: Path) -> dict:
    """Our loop: warm start (saved for TRL), then ``iterations`` GRPO iterations."""
    from trainer import checkpoint
    from trainer.loop import GRPORun

    run = GRPORun(env_id, settings)
    try:
        run.setup()
        run.warm_start()
        checkpoint.write_adapter(run.policy, adapter_dir)
        rows = []
        for i in range(iterations):
            rows.append(run.iteration(i))
    finally:
        run.close()
    timed = rows[1:] or rows
    return {
        "s_per_iteration": statistics.median(r.seconds for r in timed),
        "tokens_per_s": sum(r.generated_tokens for r in timed) / sum(r.generation_s for r in timed),
        "env_share": sum(r.env_s for r in timed) / sum(r.seconds for r in timed),
        "update_share": sum(r.update_s for r in timed) / sum(r.seconds for r in timed),
        "rewards": [r.reward_mean for r in rows],
        "trained_rollouts": [r.trained_rollouts for r in rows],
    }


def trl(env_id: str, settings, iterations: int, adapter_dir: Path) -> dict:
    """TRL's GRPOTrainer with our rollouts in ``rollout_func``; the seed travels in the prompt text."""
    from datasets import Dataset
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from trainer.chat import ChatFormat
    from trainer.engines import TransformersEngine
    from trainer.envpool import EnvPool
    from trainer.rollout import collect_groups

    g = settings.grpo
    tokenizer = AutoTokenizer.from_pretrained(settings.model)
    base = AutoModelForCausalLM.from_pretrained(settings.model)
    policy = PeftModel.from_pretrained(base, str(adapter_dir), is_trainable=True)
    chat = ChatFormat(tokenizer)
    pool = EnvPool(env_id, sandbox=settings.sandbox)
    timing = {"env": 0.0, "generation": 0.0, "tokens": 0, "steps": []}
    seeds = iter(range(10_000))

    def rollout_func(prompts, trainer):
        unique = list(dict.fromkeys(prompts))
        chosen = [next(seeds) for _ in unique]  # fresh scenarios each step, as in our loop
        engine = TransformersEngine(trainer.accelerator.unwrap_model(trainer.model), chat, settings.rollout.temperature,
                                    settings.rollout.max_new_tokens)
        rollouts, stats = collect_groups(engine, chat, pool, chosen, g.group_size, settings.rollout)
        timing["env"] += stats.env_seconds
        timing["generation"] += stats.generation_seconds
        timing["tokens"] += stats.generated_tokens
        out = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "env_reward": []}
        for rollout in rollouts:
            ids, mask = rollout.sequence()
            completion, completion_mask = ids[len(rollout.prompt_ids):], mask[len(rollout.prompt_ids):]
            out["prompt_ids"].append(rollout.prompt_ids)
            out["completion_ids"].append(completion or [chat.eos_id])
            out["env_mask"].append(completion_mask or [0])
            out["logprobs"].append([0.0] * max(1, len(completion)))
            out["env_reward"].append(rollout.reward)
        return out

    def env_reward(prompts, completions, env_reward, **kwargs):
        return list(env_reward)

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            timing["began"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            timing["steps"].append(time.perf_counter() - timing["began"])

    batch = g.groups * g.group_size
    dataset = Dataset.from_dict({"prompt": [f"seed {i}" for i in range(g.groups * (iterations + 1))]})
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-trl-"), per_device_train_batch_size=batch, num_generations=g.group_size,
        gradient_accumulation_steps=1, steps_per_generation=1, num_iterations=1, learning_rate=g.lr, beta=0.0,
        epsilon=g.epsilon, epsilon_high=g.clip_high, loss_type="grpo", temperature=settings.rollout.temperature,
        max_completion_length=settings.rollout.max_seq_len, max_steps=iterations, use_cpu=True, report_to=[],
        save_strategy="no", logging_steps=1, bf16=False, max_grad_norm=g.max_grad_norm, seed=settings.seed,
        scale_rewards="group", disable_tqdm=True, lr_scheduler_type="constant", warmup_steps=0,
    )
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    trainer = GRPOTrainer(model=policy, reward_funcs=[env_reward], args=config, train_dataset=dataset,
                          processing_class=tokenizer, rollout_func=rollout_func, callbacks=[StepTimer()])
    started = time.perf_counter()
    try:
        trainer.train()
    finally:
        pool.close()
    steps = timing["steps"][1:] or timing["steps"]
    total = sum(timing["steps"])
    return {
        "s_per_iteration": statistics.median(steps),
        "tokens_per_s": timing["tokens"] / timing["generation"] if timing["generation"] else None,
        "env_share": timing["env"] / total if total else None,
        "wall_s": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    import torch

    from trainer.config import load_config
    from trainer.tiny_model import TinySpec, ensure_tiny_model

    torch.set_num_threads(args.threads)
    root = Path(tempfile.mkdtemp(prefix="bench-train-registry-"))
    os.environ["TRACE_FACTORY_REGISTRY"] = str(root)
    env_id = register_env(root)
    settings = load_config(None, [
        f"threads={args.threads}", "sandbox='bwrap'", f"grpo.groups={args.groups}", f"grpo.group_size={args.group_size}",
        "grpo.lr=2e-3", "grpo.micro_batch_size=8", "rollout.max_new_tokens=24", "rollout.max_seq_len=1024",
        "warm_start.steps=10", "warm_start.lr=1e-2",
    ], model=str(ensure_tiny_model(spec=TinySpec(hidden_size=128, intermediate_size=384))), output_dir=tempfile.mkdtemp(prefix="bench-train-run-"))
    adapter = Path(tempfile.mkdtemp(prefix="bench-train-adapter-")) / "adapter"
    mine = ours(env_id, settings, args.iterations, adapter)
    theirs = trl(env_id, settings, args.iterations, adapter)
    result = {
        "config": {"groups": args.groups, "group_size": args.group_size, "iterations": args.iterations, "threads": args.threads,
                   "model": "tiny-qwen3 (128 dims)", "env": env_id},
        "ours": mine, "trl": theirs,
        "ratio_s_per_iteration_trl_over_ours": theirs["s_per_iteration"] / mine["s_per_iteration"],
        "ratio_tokens_per_s_trl_over_ours": (theirs["tokens_per_s"] or 0) / mine["tokens_per_s"],
    }
    print(f"{'':<12}{'s/iter':>10}{'gen tok/s':>12}{'env share':>12}")
    for name, r in (("ours", mine), ("TRL hybrid", theirs)):
        print(f"{name:<12}{r['s_per_iteration']:>10.2f}{(r['tokens_per_s'] or 0):>12.0f}{(r['env_share'] or 0):>12.1%}")
    print(f"TRL / ours: {result['ratio_s_per_iteration_trl_over_ours']:.2f}x seconds per iteration")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
