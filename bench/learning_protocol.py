"""bench_learning's protocol (issue 35): a result that cannot fool itself.

* Four seed windows that never meet (``trainer.config``'s validator): warm start, GRPO, validation, held-out.
* Every configuration (a ``--choose KEY=V1,V2`` grid over any training setting: learning rate, warm-start
  source, group size, ...) is trained with ``--train-seeds`` training seeds (default 3; ``seed`` of the run:
  LoRA init, sampling, warm-start order). During training the VALIDATION seeds are evaluated (greedy), never
  the held-out ones.
* The configuration with the best mean final validation reward is chosen; only its adapters (and the state
  after their warm start) are then scored on the HELD-OUT seeds, once, at the end.
* A demonstrating warm start (``warm_start.source = 'reference'``: the env's reference solution, which shows the
  capability) is never eligible: with ``--demonstrating`` it runs alongside and is reported apart.
* Every figure is per training seed, then mean +- spread (sample standard deviation over seeds).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from pathlib import Path
from typing import Any, Callable


def add_protocol_args(parser: argparse.ArgumentParser) -> None:
    """The protocol's flags (kept apart from bench_learning's own)."""
    parser.add_argument("--train-seeds", type=int, default=3, help="training seeds per configuration (default 3)")
    parser.add_argument("--choose", action="append", default=[], metavar="KEY=V1,V2",
                        help="a setting chosen on the validation seeds among these values (repeatable: the grid is every "
                             "combination), e.g. --choose grpo.lr=1e-4,3e-4 --choose warm_start.source=skipping,other")
    parser.add_argument("--validation", type=int, default=None, help="validation seeds (default: as many as held-out)")
    parser.add_argument("--warm-source", choices=["skipping", "other"], default="skipping",
                        help="the non-demonstrating warm start (trainer.warmstart); 'other' registers the other blueprints "
                             "on the same target through the gate")
    parser.add_argument("--demonstrating", action="store_true",
                        help="also run the demonstrating warm start (the env's reference solution), reported apart, never chosen")
    parser.add_argument("--single", action="store_true", help="one run scored on held-out during training (the bench before issue 35)")


def show_row(row: Any) -> None:
    """Progress: validation evaluations and GRPO iterations as they finish."""
    if row.phase == "validation":
        print(f"  validation after {row.iteration} updates: {row.reward_mean:.3f} [{row.reward_low:.3f}, {row.reward_high:.3f}] "
              f"n={row.valid_rollouts} ({row.seconds:.0f} s)", flush=True)
    elif row.phase == "grpo":
        mean = row.reward_mean if row.reward_mean is not None else float("nan")
        print(f"  iteration {row.iteration}: training reward {mean:.3f} trained {row.trained_rollouts} {row.seconds:.0f} s "
              f"(generation {row.generation_s:.0f} s, update {row.update_s:.0f} s)", flush=True)


def register_same_target(capability: str, root: Path) -> list[str]:
    """Register, through the gate, every other shipped blueprint on ``capability``'s target (warm_start.source 'other')."""
    import re

    from env_registry.registration import register_all
    from factory.blueprints import blueprint_names, blueprint_source
    from factory.build import build_from_blueprint
    from factory.validation.gate import Gate

    def target_of(name: str) -> str | None:  # read from the text: env code never runs in this process
        found = re.search(r'^    target = "([^"]+)"', blueprint_source(name), re.M)
        return found.group(1) if found else None

    ids = []
    target = target_of(capability)
    for name in blueprint_names():
        if name != capability and target_of(name) == target:
            result = build_from_blueprint(name, registry_root=root, gate=Gate(backend="bwrap"))
            if result.gym_id:
                ids.append(str(result.gym_id))
            print(f"registered {result.gym_id or name + ' (refused by the gate)'} for the 'other' warm start", flush=True)
    register_all(root)
    return ids


def grid(choices: list[str]) -> list[dict[str, str]]:
    """Every combination of the ``--choose`` values (one empty configuration when there is none)."""
    keys, values = [], []
    for choice in choices:
        key, _, listed = choice.partition("=")
        if not key or not listed:
            raise SystemExit(f"--choose {choice!r}: write KEY=V1,V2 (e.g. grpo.lr=1e-4,3e-4)")
        keys.append(key.strip())
        values.append([v.strip() for v in listed.split(",") if v.strip()])
    return [dict(zip(keys, combo)) for combo in itertools.product(*values)]


def setting(key: str, value: str) -> str:
    """``KEY=VALUE`` as ``--set`` reads it (TOML): a bare word such as ``other`` is quoted."""
    import tomllib

    try:
        tomllib.loads(f"x = {value}")
    except tomllib.TOMLDecodeError:
        value = json.dumps(value)
    return f"{key}={value}"


def spread(values: list[float]) -> tuple[float | None, float | None]:
    """(mean, sample standard deviation) of the values that exist; the deviation is 0 for one value."""
    kept = [v for v in values if v is not None]
    if not kept:
        return None, None
    return statistics.fmean(kept), (statistics.stdev(kept) if len(kept) > 1 else 0.0)


def fmt(pair: tuple[float | None, float | None]) -> str:
    mean, sd = pair
    return "-" if mean is None else f"{mean:.3f} +- {sd:.3f}"


def label(config: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items()) or "preset"


def train_one(env_id: str, settings: list[str], model: dict[str, Any], iterations: int, out: Path,
              show: Callable[[Any], None]) -> dict[str, Any]:
    """One training run scored on validation; the adapter after its warm start is saved for the held-out scoring."""
    from trainer import checkpoint as ckpt
    from trainer.config import load_config
    from trainer.loop import GRPORun

    config = load_config(None, settings, output_dir=str(out), **model, **{"grpo.iterations": iterations})
    holder: dict[str, Any] = {}

    def on_row(row: Any) -> None:
        if row.phase == "validation" and row.iteration == 0 and "warm" not in holder:  # right after the warm start
            holder["warm"] = str(ckpt.write_adapter(holder["run"].policy, out / "warm_adapter", holder["run"].trained_prompt))
        show(row)

    run = GRPORun(env_id, config, on_iteration=on_row)
    holder["run"] = run
    started = time.perf_counter()
    result = run.train()
    validation = [r for r in run.rows if r.phase == "validation"]
    grpo = [r for r in run.rows if r.phase == "grpo"]
    return {
        "config": config, "adapter": result.adapter_dir, "warm_adapter": holder.get("warm"),
        "validation_curve": [(r.iteration, r.reward_mean) for r in validation],
        "validation_warm": validation[0].reward_mean if validation else None,
        "validation_final": validation[-1].reward_mean if validation else None,
        "training_curve": [r.reward_mean for r in grpo], "s_per_iteration": result.summary.get("s_per_iteration"),
        "seconds": round(time.perf_counter() - started, 1),
    }


def run_protocol(args: argparse.Namespace, env_id: str, settings: list[str], model: dict[str, Any], preset: dict[str, Any],
                 out: Path, show: Callable[[Any], None]) -> dict[str, Any]:
    """Train the grid on validation, choose, score the chosen configuration's adapters on held-out once; print the table."""
    from trainer.heldout import evaluate_adapter

    validation = args.validation if args.validation is not None else preset["heldout"]
    common = [*settings, f"validation.seeds={validation}"]
    arms: list[tuple[str, dict[str, str], bool]] = [
        (label(c), c, False) for c in grid(args.choose or [f"warm_start.source={args.warm_source}"])]
    for name, config, _ in arms:
        if config.get("warm_start.source", args.warm_source).strip("'\"") == "reference":
            raise SystemExit(f"{name}: the demonstrating warm start is never a candidate; pass --demonstrating to report it apart")
    if args.demonstrating:
        arms.append(("demonstrating warm start (reference)", {"warm_start.source": "reference"}, True))
    runs: dict[str, list[dict[str, Any]]] = {}
    for name, config, _ in arms:
        extra = [setting(k, v) for k, v in {"warm_start.source": args.warm_source, **config}.items()]
        for seed in range(args.train_seeds):
            print(f"\n== {name}, training seed {seed}", flush=True)
            runs.setdefault(name, []).append(
                train_one(env_id, [*common, *extra, f"seed={seed}"], model, preset["iterations"], out / f"arm{len(runs)}-seed{seed}", show))
    candidates = [name for name, _, apart in arms if not apart]
    chosen = max(candidates, key=lambda n: spread([r["validation_final"] for r in runs[n]])[0] or float("-inf"))
    first = runs[chosen][0]["config"]
    base = evaluate_adapter(env_id, first, None)  # held-out, once per model state, at the end
    scored = [name for name, _, apart in arms if name == chosen or apart]
    for name in scored:
        for r in runs[name]:
            r["heldout_warm"] = evaluate_adapter(env_id, r["config"], r["warm_adapter"]).mean if r["warm_adapter"] else None
            r["heldout_final"] = evaluate_adapter(env_id, r["config"], r["adapter"]).mean
    print(f"\nProtocol: {args.train_seeds} training seeds per configuration; chosen on {validation} validation seeds "
          f"(from {first.validation.first_seed}); held-out {len(base.seeds)} seeds (from {first.heldout.first_seed}) scored once "
          f"at the end, for the chosen configuration{' and the demonstrating warm start' if args.demonstrating else ''} only.")
    print(f"base model, held-out: {base.mean:.3f} [{base.low:.3f}, {base.high:.3f}]")
    print(f"{'configuration':44} {'seed':>4} {'val warm':>9} {'val final':>9} {'held warm':>9} {'held final':>10}")
    cell = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    table = []
    for name, _, apart in arms:
        tag = " (apart)" if apart else (" (chosen)" if name == chosen else "")
        for seed, r in enumerate(runs[name]):
            print(f"{(name + tag)[:44]:44} {seed:>4} {cell(r['validation_warm']):>9} {cell(r['validation_final']):>9} "
                  f"{cell(r.get('heldout_warm')):>9} {cell(r.get('heldout_final')):>10}")
        summary = {k: spread([r.get(k) for r in runs[name]]) for k in ("validation_warm", "validation_final", "heldout_warm", "heldout_final")}
        print(f"{'  mean +- sd':44} {'':>4} {fmt(summary['validation_warm'])}  {fmt(summary['validation_final'])}  "
              f"{fmt(summary['heldout_warm'])}  {fmt(summary['heldout_final'])}")
        table.append({"configuration": name, "apart": apart, "chosen": name == chosen, "summary": summary,
                      "runs": [{k: v for k, v in r.items() if k != "config"} for r in runs[name]]})
    result = {"env_id": env_id, "chosen": chosen, "validation_seeds": validation, "base_heldout": base.model_dump(exclude={"rewards", "generated"}),
              "table": table, "settings": common}
    (out / "protocol.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    return result
