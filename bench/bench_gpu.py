"""One GRPO iteration on one CUDA GPU, ours against TRL's GRPOTrainer, on models of real shapes: tokens per
second, iteration time and peak memory, in bf16.

    PYTHONPATH=$PWD python bench/bench_gpu.py [--models qwen3-0.6b,qwen3-8b] [--groups 2] [--group-size 8]
        [--prompt-tokens 1024] [--completion-tokens 256] [--steps 2] [--no-trl] [--json out.json]

Nothing is downloaded: the Qwen3-0.6B and Qwen3-8B configurations are written out below (their published
shapes) and the weights are initialised at random on the GPU; a LoRA adapter (rank ``--lora-rank`` on every
linear layer) is what trains, as in ``factory train``. The rollouts are synthetic and the same for both
trainers: G groups of K completions, each group sharing one prompt (as a seed's rollouts do), random tokens of
the tiny test tokenizer's range, rewards drawn per completion. An iteration here is the policy update on that
batch (generation is not part of it): our ``PolicyUpdate`` (shared-prefix scoring, micro-batches, clipped
ratio, one optimizer step) and ``GRPOTrainer.train`` for one step with the batch handed over by
``rollout_func`` (its generation skipped). A warm-up step comes first; the figures are the mean of ``--steps``
timed steps. It stops adding models once ``--budget-s`` (default 270 s) is spent, so one run stays under
5 minutes on an H200-class GPU.

Without CUDA it prints one line, ``needs a CUDA GPU``, and exits 1 (CI never runs it).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: Published shapes (config.json of Qwen/Qwen3-0.6B and Qwen/Qwen3-8B), written out: nothing is downloaded.
CONFIGS: dict[str, dict[str, Any]] = {
    "qwen3-0.6b": {
        "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
        "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "hidden_act": "silu",
        "attention_bias": False, "bos_token_id": 151643, "eos_token_id": 151645,
    },
    "qwen3-8b": {
        "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
        "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "hidden_act": "silu",
        "attention_bias": False, "bos_token_id": 151643, "eos_token_id": 151643,
    },
}
#: Parameter counts the shapes give (Qwen's model cards: 0.6B and 8.2B), checked by the tests on the meta device.
PARAMETERS = {"qwen3-0.6b": 596_049_920, "qwen3-8b": 8_190_735_360}
NO_CUDA = "bench_gpu: needs a CUDA GPU (torch.cuda.is_available() is False here); it runs nowhere else"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="qwen3-0.6b,qwen3-8b", help=f"comma-separated, of {', '.join(CONFIGS)}")
    parser.add_argument("--groups", type=int, default=2, help="G: prompts (seeds) in the batch")
    parser.add_argument("--group-size", type=int, default=8, help="K: completions per prompt")
    parser.add_argument("--prompt-tokens", type=int, default=1024)
    parser.add_argument("--completion-tokens", type=int, default=256)
    parser.add_argument("--micro-batch", type=int, default=4, help="trajectories per forward pass, both trainers")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--steps", type=int, default=2, help="timed steps per trainer (after one warm-up step)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=270.0, help="start no further model past this many seconds")
    parser.add_argument("--no-trl", action="store_true", help="leave TRL's GRPOTrainer out")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in CONFIGS]
    if unknown or not names:
        parser.error(f"--models: unknown {unknown or 'empty'}; choose from {', '.join(CONFIGS)}")
    if args.groups < 1 or args.group_size < 2 or args.prompt_tokens < 1 or args.completion_tokens < 1 or args.steps < 1:
        parser.error("--groups >= 1, --group-size >= 2, --prompt-tokens, --completion-tokens and --steps >= 1")
    if (args.groups * args.group_size) % args.micro_batch:
        parser.error(f"--micro-batch {args.micro_batch} must divide the batch of {args.groups * args.group_size}")
    args.models = names
    return args


def qwen3_config(name: str) -> Any:
    from transformers import Qwen3Config

    return Qwen3Config(**CONFIGS[name], torch_dtype="bfloat16")


def build_policy(name: str, rank: int, seed: int) -> Any:
    """The model of ``name``'s shape with random bf16 weights on the GPU, and a fresh LoRA adapter on every linear layer."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trainer.model import linear_module_names

    torch.manual_seed(seed)
    with torch.device("cuda"):
        base = AutoModelForCausalLM.from_config(qwen3_config(name), dtype=torch.bfloat16)
    config = LoraConfig(r=rank, lora_alpha=rank, lora_dropout=0.0, target_modules=linear_module_names(base), bias="none",
                        task_type="CAUSAL_LM")
    return get_peft_model(base, config)


def rollouts(args: argparse.Namespace, vocab: int, seed: int) -> list[tuple[list[int], list[int], float]]:
    """(prompt ids, completion ids, reward) per completion; a group's completions share their prompt."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(args.groups):
        prompt = [rng.randrange(vocab) for _ in range(args.prompt_tokens)]
        for _ in range(args.group_size):
            out.append((prompt, [rng.randrange(vocab) for _ in range(args.completion_tokens)], float(rng.random() < 0.5)))
    return out


def _figures(seconds: list[float], tokens: int, peak: int) -> dict[str, float]:
    mean = sum(seconds) / len(seconds)
    return {"iteration_s": round(mean, 3), "tokens_per_s": round(tokens / mean, 1), "peak_memory_gb": round(peak / 2**30, 2)}


def ours(name: str, batch: list[tuple[list[int], list[int], float]], args: argparse.Namespace, pad_id: int) -> dict[str, float]:
    """Our update (``trainer.update.PolicyUpdate``, as ``GRPORun`` builds it) on the batch: 1 warm-up + timed steps."""
    import torch
    from accelerate import Accelerator

    from trainer.config import GRPOSettings
    from trainer.logprobs import TokenLogProbs
    from trainer.model import trainable_parameters
    from trainer.update import Item, PolicyUpdate

    policy = build_policy(name, args.lora_rank, args.seed)
    settings = GRPOSettings(lr=args.lr, micro_batch_size=args.micro_batch, groups=args.groups, group_size=args.group_size)
    accelerator = Accelerator(mixed_precision="no")
    module, optimizer = accelerator.prepare(TokenLogProbs(policy, settings.logprob_chunk, 1.0),
                                            torch.optim.AdamW(trainable_parameters(policy), lr=args.lr))
    update = PolicyUpdate(accelerator, module, optimizer, settings, pad_id)
    items = []
    for g in range(args.groups):
        group = batch[g * args.group_size:(g + 1) * args.group_size]
        rewards = torch.tensor([r for _, _, r in group])
        advantages = ((rewards - rewards.mean()) / (rewards.std() + 1e-4)).tolist()
        items += [Item(p + c, [0] * len(p) + [1] * len(c), a) for (p, c, _), a in zip(group, advantages)]
    seconds = []
    torch.cuda.reset_peak_memory_stats()
    for step in range(args.steps + 1):
        torch.cuda.synchronize()
        started = time.perf_counter()
        update.grpo(items, items[0], torch.Generator().manual_seed(args.seed))
        torch.cuda.synchronize()
        if step:
            seconds.append(time.perf_counter() - started)
    figures = _figures(seconds, sum(len(i.ids) for i in items), torch.cuda.max_memory_allocated())
    del update, module, optimizer, policy
    return figures


def trl(name: str, batch: list[tuple[list[int], list[int], float]], args: argparse.Namespace, tokenizer: Any) -> dict[str, float]:
    """TRL's GRPOTrainer on the same batch (handed over by ``rollout_func``), same micro-batch, lr, clip, bf16."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    policy = build_policy(name, args.lora_rank, args.seed)
    timing: dict[str, Any] = {"inside": 0.0, "steps": []}

    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, list[Any]]:
        started = time.perf_counter()
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_reward": []}
        for prompt, completion, reward in batch:
            out["prompt_ids"].append(prompt)
            out["completion_ids"].append(completion)
            out["logprobs"].append([0.0] * len(completion))
            out["env_reward"].append(reward)
        timing["inside"] += time.perf_counter() - started
        return out

    def env_reward(prompts: Any, completions: Any, env_reward: list[float], **kwargs: Any) -> list[float]:
        return list(env_reward)

    class StepTimer(TrainerCallback):
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            torch.cuda.synchronize()
            timing["began"], timing["inside"] = time.perf_counter(), 0.0

        def on_step_end(self, *a: Any, **k: Any) -> None:
            torch.cuda.synchronize()
            timing["steps"].append(time.perf_counter() - timing["began"] - timing["inside"])

    size = args.groups * args.group_size
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-gpu-trl-"), per_device_train_batch_size=args.micro_batch,
        num_generations=args.group_size, gradient_accumulation_steps=size // args.micro_batch,
        steps_per_generation=size // args.micro_batch, num_iterations=1, learning_rate=args.lr, beta=0.0, epsilon=0.2,
        loss_type="grpo", max_completion_length=args.completion_tokens, max_steps=args.steps + 1, report_to=[],
        save_strategy="no", logging_strategy="no", bf16=True, max_grad_norm=1.0, seed=args.seed, scale_rewards="group",
        disable_tqdm=True, lr_scheduler_type="constant", warmup_steps=0,
    )
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    dataset = Dataset.from_dict({"prompt": [f"seed {i}" for i in range(args.groups * (args.steps + 1))]})
    torch.cuda.reset_peak_memory_stats()
    trainer = GRPOTrainer(model=policy, reward_funcs=[env_reward], args=config, train_dataset=dataset,
                          processing_class=tokenizer, rollout_func=rollout_func, callbacks=[StepTimer()])
    trainer.train()
    figures = _figures(timing["steps"][1:] or timing["steps"], sum(len(p) + len(c) for p, c, _ in batch),
                       torch.cuda.max_memory_allocated())
    del trainer, policy
    return figures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(NO_CUDA)
        return 1
    from transformers import AutoTokenizer

    from trainer.tiny_model import ensure_tiny_model

    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(str(ensure_tiny_model()))  # ids of its range are valid in any Qwen3 vocab
    batch = rollouts(args, len(tokenizer), args.seed)
    results: dict[str, Any] = {"gpu": torch.cuda.get_device_name(0), "batch": f"{args.groups}x{args.group_size}",
                               "tokens_per_sequence": args.prompt_tokens + args.completion_tokens, "models": {}}
    for name in args.models:
        if time.perf_counter() - started > args.budget_s:
            results["models"][name] = {"skipped": f"over the {args.budget_s:.0f} s budget"}
            continue
        row: dict[str, Any] = {"ours": ours(name, batch, args, tokenizer.pad_token_id)}
        gc.collect()
        torch.cuda.empty_cache()
        if not args.no_trl:
            row["trl"] = trl(name, batch, args, tokenizer)
            row["trl_over_ours_time"] = round(row["trl"]["iteration_s"] / row["ours"]["iteration_s"], 2)
            gc.collect()
            torch.cuda.empty_cache()
        results["models"][name] = row
        print(f"{name}: {json.dumps(row)}", flush=True)
    results["wall_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
