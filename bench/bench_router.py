"""Benchmark: routing decision time and adapter switch time for small models on CPU, measured in one run.

    python bench/bench_router.py [--tasks 12] [--switches 30] [--models tiny,small] [--threads 1] [--json]

Menu: the built-in blueprints (real τ² and ToolSandbox envs), admitted by a light validation gate into a
temporary registry, their reference episodes played in the sandbox. Tasks: first user messages of real
τ² airline tasks. Models: ``tiny`` (the test model, 2 layers, 64 wide) and ``small`` (the same tokenizer
with a 4-layer, 256-wide Qwen3), both random and built offline by ``trainer.tiny_model``.

Figures per model:
- decision: first task (the menu's key/value cache is built), then the median over the other tasks, with
  one label order (the paper) and with cyclic debiasing (one pass per menu option), and without the cache;
- switch: median time to move from one adapter to another with PEFT ``set_adapter`` (adapters stay
  separate), against a weight merge (unmerge the old adapter, merge the new one into the base weights),
  and the ratio merge / set_adapter; plus building a soft ``cat`` mix of two adapters.

Both are measured interleaved (task by task, the three router set-ups take turns; switch by switch, the
two adapter sets, one per model copy, take turns, the order flipping every switch), so load that comes and
goes hits every side alike, and with torch's thread count pinned (default 1; the merge figure was once
48.8 ms at 2 threads against 6.4 ms at 1 on a shared 2-core machine: it measured thread contention).
Absolute numbers depend on the machine and its load; the ratios are the result.
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
CAPABILITIES = ["precondition_verification", "permission_error_recovery", "multi_step_task_completion", "datetime_reasoning"]
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def small_spec():  # type: ignore[no-untyped-def]
    from trainer.tiny_model import TinySpec

    return TinySpec(hidden_size=256, intermediate_size=768, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2)


def build_menu_for_bench(root: Path):  # type: ignore[no-untyped-def]
    from env_registry.registry import Registry
    from factory.build import build_from_blueprint
    from factory.validation.gate import Gate
    from router.menu import build_menu
    from schemas.validation import ValidationConfig

    light = ValidationConfig(solvability_seeds=8, necessity_seeds=8, diversity_seeds=16, grpo_seeds=4, grpo_group_size=4, fuzz_examples=8)
    for name in CAPABILITIES:
        result = build_from_blueprint(name, registry_root=root, gate=Gate(config=light))
        if not result.registered:
            raise SystemExit(f"blueprint {name} did not pass the gate: {result.error}")
    return build_menu(registry=Registry(root), capabilities=CAPABILITIES)


def tasks(count: int) -> list[str]:
    from factory.testing.injection import Tau2Domain, build_cases

    cases = build_cases([Tau2Domain.load(REPO.parent / "shared" / "targets" / "tau2" / "airline")], seed=0)
    # The customer's first message (τ² transcripts open with the agent's greeting, the same in every task).
    firsts = [next(m.content for m in c.trajectory.messages if m.role == "user") for c in cases if c.kind == "success"]
    if len(set(firsts[:count])) < min(count, len(firsts)):
        raise SystemExit("bench_router: the task texts repeat, so cached decisions would be timed")
    return firsts[:count]


def make_adapters(path: Path, root: Path) -> dict[str, Path]:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    out = {}
    for seed, name in enumerate(CAPABILITIES, start=1):
        torch.manual_seed(seed)
        config = LoraConfig(r=16, lora_alpha=32, target_modules=TARGETS, init_lora_weights=False)
        get_peft_model(AutoModelForCausalLM.from_pretrained(path), config).save_pretrained(root / name)
        out[name] = root / name
    return out


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000.0


def decision_times(model, tokenizer, menu, texts: list[str]) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from router.decide import Router
    from router.schema import RouterConfig

    Router(model, tokenizer, menu, RouterConfig(prefix_cache=False)).route(texts[-1])  # warm-up: first-call costs
    setups = {"fixed": (RouterConfig(), len(texts)), "debiased": (RouterConfig(debias="cyclic"), len(texts)),
              "fixed, no cache": (RouterConfig(prefix_cache=False), 3)}
    routers = {label: Router(model, tokenizer, menu, config) for label, (config, _) in setups.items()}
    seconds: dict[str, list[float]] = {label: [] for label in setups}
    for index, text in enumerate(texts):  # interleaved: each task goes through every set-up, in turn
        labels = [label for label, (_, count) in setups.items() if index < count]
        for label in labels if index % 2 == 0 else reversed(labels):
            seconds[label].append(routers[label].route(text).seconds)
    figures: dict[str, float] = {}
    for label, samples in seconds.items():
        print(f"  {label}: {len(samples)} tasks routed", file=sys.stderr)
        figures[f"{label}: first ms"] = samples[0] * 1000.0
        figures[f"{label}: median ms"] = median_ms(samples[1:])
    figures["prompt tokens"] = float(routers["fixed"].route(texts[0]).prompt_tokens)
    return figures


def switch_times(path: Path, adapter_dirs: dict[str, Path], switches: int) -> dict[str, float]:
    from transformers import AutoModelForCausalLM

    from router.apply_peft import AdapterSet
    from router.schema import RouteDecision

    names = list(adapter_dirs)
    sets = {merge: AdapterSet.load(AutoModelForCausalLM.from_pretrained(path).eval(), adapter_dirs, merge=merge)
            for merge in (False, True)}  # one model copy each: a merge changes its base weights
    samples: dict[bool, list[float]] = {False: [], True: []}
    for i in range(switches):
        for merge in (False, True) if i % 2 == 0 else (True, False):
            started = time.perf_counter()
            sets[merge].apply(names[i % len(names)])
            samples[merge].append(time.perf_counter() - started)
    figures = {"set_adapter switch ms": median_ms(samples[False][1:]), "merge switch ms": median_ms(samples[True][1:])}
    adapters = sets[False]
    mix = RouteDecision(choice=names[0], label="A", probabilities={}, weights={names[0]: 0.6, names[1]: 0.4}, mode="soft")
    started = time.perf_counter()
    adapters.apply(mix)
    figures["soft mix, first ms"] = (time.perf_counter() - started) * 1000.0
    started = time.perf_counter()
    adapters.apply(mix)
    figures["soft mix, reused ms"] = (time.perf_counter() - started) * 1000.0
    figures["merge / set_adapter"] = figures["merge switch ms"] / figures["set_adapter switch ms"]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--switches", type=int, default=30)
    parser.add_argument("--models", default="tiny,small")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, pinned for the whole run (default 1)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    import torch

    torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from trainer.tiny_model import ensure_tiny_model

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        menu = build_menu_for_bench(Path(tmp) / "registry")
        menu_seconds = time.perf_counter() - started
        texts = tasks(args.tasks)
        for name in args.models.split(","):
            path = ensure_tiny_model(spec=small_spec() if name == "small" else None)
            tokenizer = AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path).eval()
            figures = {"parameters (M)": sum(p.numel() for p in model.parameters()) / 1e6}
            print(f"{name}: {figures['parameters (M)']:.2f}M parameters", file=sys.stderr)
            figures |= decision_times(model, tokenizer, menu, texts)
            figures |= switch_times(path, make_adapters(path, Path(tmp) / f"adapters-{name}"), args.switches)
            results[name] = figures
    if args.json:
        print(json.dumps({"menu_build_s": menu_seconds, "threads": torch.get_num_threads(), "models": results}, indent=2))
        return 0
    print(f"menu of {len(CAPABILITIES)} capabilities built in {menu_seconds:.1f} s (gate + sandboxed reference episodes); "
          f"{args.tasks} τ² tasks; torch threads: {torch.get_num_threads()}")  # fmt: skip
    names = list(results)
    print(f"{'':<28}" + "".join(f"{n:>14}" for n in names))
    for key in results[names[0]]:
        print(f"{key:<28}" + "".join(f"{results[n][key]:>14.2f}" for n in names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
