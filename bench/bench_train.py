"""Seconds per GRPO iteration on a real blueprint env, before and after the shared prompt and turn stops, and
ours against TRL's GRPOTrainer on the same rollouts: every arm interleaved in one run.

    PYTHONPATH=$PWD python bench/bench_train.py [--env precondition_verification] [--rounds 4] [--groups 4]
        [--group-size 8] [--max-new-tokens 64] [--threads 1] [--no-trl] [--json out.json]

Workload: the blueprint env (``factory/blueprints/<env>.py``, a ~3k-token prompt) in bwrap sandboxes, the
tiny 128-dim Qwen3 of the tests with a LoRA adapter, after the config's default warm start; G x K rollouts.
Each round draws fresh seeds and runs, from the same adapter weights and optimizer state:

* before: generation with every prompt prefilled whole and turns ending only at the eos, then the update
  over whole sequences (the trainer as it was);
* after: shared prefixes prefilled once, turns ending at ``</tool_call>`` too, the update with shared
  prefixes (the trainer now); its weights go on to the next round;
* same rollouts: the update over whole sequences on the after arm's rollouts: its loss and gradient norm
  must equal the shared update's, and its time isolates the update's gain;
* prefix only: generation with shared prefixes but eos-only stops, from the same sampler seed as "before":
  it must sample the same tokens, and its time isolates the prefill's gain;
* TRL: ``GRPOTrainer`` (same model, adapter weights, batch, micro-batch, lr, clip) updating on the after
  arm's rollouts, handed over by ``rollout_func``; its figure is its step time without that hand-over, plus
  the after arm's generation time (the same rollouts).

The arms alternate order every round; round 1 is a warm-up (sandbox starts, allocator) and is left out.
Wall seconds depend on the load (the 1-minute load average is printed); CPU seconds of this process are
printed beside them. Absolute times depend on the machine; the ratios are the result.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def register_env(root: Path, name: str) -> str:
    """The blueprint (or a test env) in a temporary registry; the gate is not rerun (the blueprints pass it)."""
    from env_registry.registration import register_all
    from env_registry.registry import Registry
    from trace_env.loader import load_env

    path = REPO / "factory" / "blueprints" / f"{name}.py"
    if not path.exists():
        path = REPO / "tests" / "envs" / f"{name}.py"
    if not path.exists():
        raise SystemExit(f"bench_train: no blueprint or test env named {name!r}")
    source = path.read_text()
    env = load_env(source)
    manifest, _ = Registry(root).put(source, capability=env.capability, target=env.target, tools=env.tools(), max_steps=env.max_steps)
    register_all(root)
    return manifest.gym_id


class Clock:
    """Wall and CPU seconds (this process, all threads) of one block."""

    def __enter__(self) -> "Clock":
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


class OwnAccumulation:
    """accelerate keeps one GradientState per process, shared by every Accelerator: while TRL's trainer is
    between micro-steps of its accumulation (where ``rollout_func`` runs), our optimizer would skip its
    step and its zero_grad and divide the loss by TRL's accumulation count. Our arms run with one
    accumulation step, synced, and TRL's state is put back after."""

    def __init__(self, accelerator: Any) -> None:
        self.state = accelerator.gradient_state

    def __enter__(self) -> None:
        self.saved = (self.state.sync_gradients, self.state.plugin_kwargs.get("num_steps", 1))
        self.state._set_sync_gradients(True)
        self.state.plugin_kwargs.update({"num_steps": 1})

    def __exit__(self, *exc: Any) -> None:
        self.state._set_sync_gradients(self.saved[0])
        self.state.plugin_kwargs.update({"num_steps": self.saved[1]})


class Bench:
    """One GRPORun (model, adapter, optimizer, env pool) driven arm by arm."""

    def __init__(self, run: Any, seed: int) -> None:
        from trainer.engines import StopRule, TransformersEngine

        self.run, self.seed = run, seed
        c = run.config.rollout
        eos_only = StopRule([run.chat.eos_id], [])
        self.engines = {
            "before": TransformersEngine(run.policy, run.chat, c.temperature, c.max_new_tokens, share_prefix=False, stops=eos_only),
            "prefix only": TransformersEngine(run.policy, run.chat, c.temperature, c.max_new_tokens, share_prefix=True, stops=eos_only),
            "after": TransformersEngine(run.policy, run.chat, c.temperature, c.max_new_tokens),
        }
        self.rows: list[dict[str, Any]] = []

    def snapshot(self) -> tuple[list[Any], dict[str, Any]]:
        from trainer.model import trainable_parameters

        return [p.detach().clone() for p in trainable_parameters(self.run.policy)], copy.deepcopy(self.run.optimizer.state_dict())

    def restore(self, state: tuple[list[Any], dict[str, Any]]) -> None:
        import torch

        from trainer.model import trainable_parameters

        with torch.no_grad():
            for param, value in zip(trainable_parameters(self.run.policy), state[0]):
                param.copy_(value)
        self.run.optimizer.load_state_dict(copy.deepcopy(state[1]))

    def generate(self, arm: str, seeds: list[int], sampler_seed: int) -> tuple[list[Any], dict[str, float]]:
        import torch

        from trainer.rollout import collect_groups

        c = self.run.config
        torch.manual_seed(sampler_seed)
        with Clock() as clock:
            rollouts, stats = collect_groups(self.engines[arm], self.run.chat, self.run.pool, seeds, c.grpo.group_size, c.rollout)
        return rollouts, {"gen_s": clock.wall, "gen_cpu": clock.cpu, "env_s": stats.env_seconds,
                          "tokens": stats.generated_tokens, "cut_turns": sum(r.cut_turns for r in rollouts),
                          "errors": sum(r.termination == "infrastructure_error" for r in rollouts)}

    def update(self, rollouts: list[Any], share: bool) -> dict[str, float]:
        import torch

        from trainer.update import build_items

        run = self.run
        items, _, flat = build_items(rollouts, run.config.grpo)
        run.update.share_prefix = share
        with Clock() as clock:
            stats = run.update.grpo(items, run._filler(rollouts), torch.Generator().manual_seed(self.seed))
        return {"update_s": clock.wall, "update_cpu": clock.cpu, "loss": stats.loss, "logprob_sum": stats.logprob_sum,
                "grad_norm": stats.grad_norms[-1] if stats.grad_norms else 0.0, "trained": len(items), "flat_groups": flat}

    def round(self, index: int) -> list[Any]:
        """All arms of one round; returns the after arm's rollouts (TRL's batch) with the start weights restored
        into ``self.start`` for whoever updates next, and leaves the after arm's weights in the model."""
        g = self.run.config.grpo
        seeds = [self.run.config.first_env_seed + index * g.groups + j for j in range(g.groups)]
        sampler = self.seed * 1_000 + index
        start = self.snapshot()
        row: dict[str, Any] = {"round": index + 1, "load": os.getloadavg()[0]}
        out: dict[str, Any] = {}

        def before() -> None:
            self.restore(start)
            rollouts, gen = self.generate("before", seeds, sampler)
            out["before_tokens"] = [r.completion_ids for r in rollouts]
            row["before"] = gen | self.update(rollouts, share=False)

        def after() -> None:
            self.restore(start)
            rollouts, gen = self.generate("after", seeds, sampler)
            row["after"] = gen | self.update(rollouts, share=True)
            out["after"], out["after_state"] = rollouts, self.snapshot()

        def same_rollouts() -> None:
            self.restore(start)
            row["same rollouts"] = self.update(out["after"], share=False)

        def prefix_only() -> None:
            rollouts, gen = self.generate("prefix only", seeds, sampler)
            out["prefix_tokens"] = [r.completion_ids for r in rollouts]
            row["prefix only"] = gen

        arms: list[Callable[[], None]] = [before, after, prefix_only] if index % 2 == 0 else [prefix_only, after, before]
        with OwnAccumulation(self.run.accelerator):
            for arm in arms:
                self.restore(start)
                arm()
            same_rollouts()
        row["prefix only"]["identical_to_before"] = out["prefix_tokens"] == out["before_tokens"]
        self.start = start
        self.restore(out["after_state"])
        self.rows.append(row)
        print(f"round {index + 1}: before {row['before']['gen_s'] + row['before']['update_s']:.1f} s, after "
              f"{row['after']['gen_s'] + row['after']['update_s']:.1f} s, update plain/shared on the same rollouts "
              f"{row['same rollouts']['update_s']:.2f}/{row['after']['update_s']:.2f} s, loss "
              f"{row['same rollouts']['loss']:.6g}/{row['after']['loss']:.6g}, load {row['load']:.1f}", file=sys.stderr, flush=True)
        return out["after"]


def trl_arm(bench: Bench, adapter_dir: Path, rounds: int) -> list[float]:
    """TRL's GRPOTrainer stepping on the after arm's rollouts; each step starts from the weights our arms
    started from. Returns its step seconds, the time spent inside ``rollout_func`` (our arms) taken out."""
    import torch
    from datasets import Dataset
    from peft import PeftModel, set_peft_model_state_dict
    from peft.utils import get_peft_model_state_dict
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    run = bench.run
    settings, g, chat = run.config, run.config.grpo, run.chat
    tokenizer = AutoTokenizer.from_pretrained(settings.model)
    policy = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(settings.model), str(adapter_dir), is_trainable=True)
    timing: dict[str, Any] = {"inside": 0.0, "steps": []}

    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, list[Any]]:
        started = time.perf_counter()
        rollouts = bench.round(len(bench.rows))
        ours_now = bench.snapshot()
        bench.restore(bench.start)  # TRL's policy takes the weights this round started from
        with torch.no_grad():
            set_peft_model_state_dict(trainer.accelerator.unwrap_model(trainer.model), get_peft_model_state_dict(run.policy))
        bench.restore(ours_now)
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "env_reward": []}
        for rollout in rollouts:
            ids, mask = rollout.sequence()
            completion, completion_mask = ids[len(rollout.prompt_ids):], mask[len(rollout.prompt_ids):]
            out["prompt_ids"].append(rollout.prompt_ids)
            out["completion_ids"].append(completion or [chat.eos_id])
            out["env_mask"].append(completion_mask or [0])
            out["logprobs"].append([0.0] * max(1, len(completion)))
            out["env_reward"].append(rollout.reward)
        timing["inside"] += time.perf_counter() - started
        return out

    def env_reward(prompts: Any, completions: Any, env_reward: list[float], **kwargs: Any) -> list[float]:
        return list(env_reward)

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            timing["began"], timing["inside"] = time.perf_counter(), 0.0

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            timing["steps"].append(time.perf_counter() - timing["began"] - timing["inside"])

    batch = g.groups * g.group_size
    micro = min(g.micro_batch_size, batch)
    dataset = Dataset.from_dict({"prompt": [f"seed {i}" for i in range(g.groups * (rounds + 1))]})
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-trl-"), per_device_train_batch_size=micro, num_generations=g.group_size,
        gradient_accumulation_steps=batch // micro, steps_per_generation=batch // micro, num_iterations=1,
        learning_rate=g.lr, beta=0.0, epsilon=g.epsilon, epsilon_high=g.clip_high, loss_type="grpo",
        temperature=settings.rollout.temperature, max_completion_length=settings.rollout.max_seq_len, max_steps=rounds,
        use_cpu=True, report_to=[], save_strategy="no", logging_strategy="no", bf16=False, max_grad_norm=g.max_grad_norm,
        seed=settings.seed, scale_rewards="group", disable_tqdm=True, lr_scheduler_type="constant", warmup_steps=0,
    )
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    trainer = GRPOTrainer(model=policy, reward_funcs=[env_reward], args=config, train_dataset=dataset,
                          processing_class=tokenizer, rollout_func=rollout_func, callbacks=[StepTimer()])
    trainer.train()
    return timing["steps"]


def summarise(rows: list[dict[str, Any]], trl_steps: list[float]) -> dict[str, Any]:
    timed = rows[1:] or rows
    med = lambda values: statistics.median(values) if values else None  # noqa: E731

    def arm(name: str) -> dict[str, Any]:
        parts = [r[name] for r in timed]
        out: dict[str, Any] = {}
        for key in ("gen_s", "gen_cpu", "update_s", "update_cpu", "env_s", "tokens", "cut_turns", "errors"):
            if key in parts[0]:
                out[key] = med([p[key] for p in parts])
        if "gen_s" in out and "update_s" in out:
            out["s_per_iteration"] = med([p["gen_s"] + p["update_s"] for p in parts])
            out["cpu_per_iteration"] = med([p["gen_cpu"] + p["update_cpu"] for p in parts])
            out["env_share"] = sum(p["env_s"] for p in parts) / sum(p["gen_s"] + p["update_s"] for p in parts)
        return out

    result: dict[str, Any] = {name: arm(name) for name in ("before", "after", "same rollouts", "prefix only")}
    b, a, s, p = (result[k] for k in ("before", "after", "same rollouts", "prefix only"))
    deltas = [abs(r["same rollouts"]["loss"] - r["after"]["loss"]) for r in rows]
    norms = [abs(r["same rollouts"]["grad_norm"] - r["after"]["grad_norm"]) / max(1e-12, abs(r["same rollouts"]["grad_norm"])) for r in rows]
    result["ratios"] = {
        "iteration before / after (wall)": b["s_per_iteration"] / a["s_per_iteration"],
        "iteration before / after (cpu)": b["cpu_per_iteration"] / a["cpu_per_iteration"],
        "generation before / prefix only": b["gen_s"] / p["gen_s"],
        "update plain / shared, same rollouts": s["update_s"] / a["update_s"],
    }
    result["identical"] = {
        "max |loss plain - loss shared|": max(deltas),
        "max relative grad-norm difference": max(norms),
        "rounds where prefix-only sampled the before arm's tokens": f"{sum(r['prefix only']['identical_to_before'] for r in rows)}/{len(rows)}",
        "sandbox errors (before, prefix only, after), all rounds": [sum(r[k]["errors"] for r in rows) for k in ("before", "prefix only", "after")],
    }
    result["trained_nothing"] = {name: f"{sum(r[name]['trained'] == 0 for r in rows)}/{len(rows)}" for name in ("before", "after")}
    if trl_steps:
        trl_update = med(trl_steps[1:] or trl_steps)
        result["trl"] = {"update_s": trl_update, "s_per_iteration": a["gen_s"] + trl_update,
                         "env_share": a["env_s"] / (a["gen_s"] + trl_update)}
        result["ratios"]["TRL update / ours, same rollouts"] = trl_update / a["update_s"]
        result["ratios"]["TRL iteration / ours after"] = (a["gen_s"] + trl_update) / a["s_per_iteration"]
    result["load_1min"] = [round(r["load"], 2) for r in rows]
    return result


def report(result: dict[str, Any], header: str) -> None:
    print(header)
    print(f"{'':<16}{'s/iter':>9}{'cpu-s/it':>10}{'gen s':>9}{'update s':>10}{'env share':>11}{'tokens':>8}{'cut turns':>11}")
    rows = [(name, result[name]) for name in ("before", "after", "same rollouts", "prefix only")]
    if "trl" in result:
        rows.append(("TRL (same)", result["trl"]))
    for name, r in rows:
        cell = lambda key, spec: format(r[key], spec) if r.get(key) is not None else "-"  # noqa: E731
        print(f"{name:<16}{cell('s_per_iteration', '9.1f'):>9}{cell('cpu_per_iteration', '10.1f'):>10}{cell('gen_s', '9.1f'):>9}"
              f"{cell('update_s', '10.2f'):>10}{cell('env_share', '11.1%'):>11}{cell('tokens', '8.0f'):>8}{cell('cut_turns', '11.0f'):>11}")
    for key, value in result["ratios"].items():
        print(f"{key}: {value:.2f}x")
    for key, value in result["identical"].items():
        print(f"{key}: {value if isinstance(value, (str, list)) else format(value, '.2e')}")
    print(f"rounds that trained nothing: before {result['trained_nothing']['before']}, after {result['trained_nothing']['after']}")
    print(f"1-minute load average per round: {result['load_1min']} on {os.cpu_count()} cores")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="precondition_verification", help="a blueprint name (or a tests/envs module)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of all arms; the first is a warm-up")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-trl", action="store_true", help="leave TRL's GRPOTrainer out")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--sandbox", default="auto", help="sandbox backend of the env workers (bwrap, docker, auto)")
    args = parser.parse_args()

    import torch

    from trainer import checkpoint
    from trainer.config import load_config
    from trainer.loop import GRPORun
    from trainer.tiny_model import TinySpec, ensure_tiny_model

    torch.set_num_threads(args.threads)
    root = Path(tempfile.mkdtemp(prefix="bench-train-registry-"))
    os.environ["TRACE_FACTORY_REGISTRY"] = str(root)
    env_id = register_env(root, args.env)
    settings = load_config(None, [
        f"threads={args.threads}", f"sandbox={json.dumps(args.sandbox)}", f"grpo.groups={args.groups}", f"grpo.group_size={args.group_size}",
        f"grpo.micro_batch_size={args.micro_batch}", f"rollout.max_new_tokens={args.max_new_tokens}",
    ], model=str(ensure_tiny_model(spec=TinySpec(hidden_size=128, intermediate_size=384))),
        output_dir=tempfile.mkdtemp(prefix="bench-train-run-"))
    run = GRPORun(env_id, settings)
    try:
        run.setup()
        with Clock() as warm:
            run.warm_start()
        print(f"warm start: {warm.wall:.0f} s", file=sys.stderr, flush=True)
        adapter = Path(tempfile.mkdtemp(prefix="bench-train-adapter-")) / "adapter"
        checkpoint.write_adapter(run.policy, adapter)
        bench = Bench(run, settings.seed)
        if args.no_trl:
            for index in range(args.rounds):
                bench.round(index)
            trl_steps: list[float] = []
        else:
            trl_steps = trl_arm(bench, adapter, args.rounds)
    finally:
        run.close()
    result = summarise(bench.rows, trl_steps)
    w = settings.warm_start
    header = (f"{env_id}: {args.groups} x {args.group_size} rollouts, tiny Qwen3 (128 dims) + LoRA, <= {args.max_new_tokens} "
              f"new tokens per turn, micro-batch {args.micro_batch}, {args.threads} torch thread(s); warm start {w.steps} steps "
              f"(lr {w.lr}) took {warm.wall:.0f} s; medians of rounds 2..{args.rounds} (round 1 is a warm-up)")
    report(result, header)
    if args.json:
        args.json.write_text(json.dumps({"config": vars(args) | {"json": str(args.json)}, "warm_start_s": warm.wall,
                                         "rows": bench.rows, "summary": result}, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
