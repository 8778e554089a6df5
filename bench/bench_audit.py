"""What the reward audit costs, and that it never fires on the shipped envs: short real GRPO runs (tiny CPU model,
no warm start, no held-out) on the blueprints and the example env at a given audit share.

    python bench/bench_audit.py --share 0.25 tool_calling_precision
    python bench/bench_audit.py --share 1.0 --groups 2 --group-size 4        # every blueprint + the example env

Prints, per env: each iteration's seconds, episodes offered and audited, replays that failed, the seconds the
audit thread spent (fresh worker start plus replay, concurrent with training) and the run's wall time
(which includes waiting for the last replays). Exit 1 if any audit found a mismatch.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="*", help="blueprint names or env files (default: every blueprint and the example env)")
    parser.add_argument("--share", type=float, default=0.25)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--sandbox", default="bwrap")
    args = parser.parse_args()
    os.environ["TRACE_FACTORY_REGISTRY"] = tempfile.mkdtemp(prefix="bench-audit-")

    import torch

    from env_registry.audit import AuditMismatch
    from env_registry.registration import register_all
    from env_registry.registry import Registry
    from factory.blueprints import blueprint_names, blueprint_source
    from trace_env.loader import load_env
    from trainer.config import load_config
    from trainer.loop import GRPORun
    from trainer.tiny_model import TinySpec, ensure_tiny_model

    torch.set_num_threads(1)
    root = Path(os.environ["TRACE_FACTORY_REGISTRY"])
    model = ensure_tiny_model(spec=TinySpec(hidden_size=128, intermediate_size=384))
    names = args.envs or [*blueprint_names(), "examples/envs/cancellation_eligibility.py"]
    failed = 0
    for name in names:
        source = Path(name).read_text() if name.endswith(".py") else blueprint_source(name)
        env = load_env(source)
        manifest, _ = Registry(root).put(source, capability=env.capability, target=env.target, tools=env.tools(),
                                         max_steps=env.max_steps)
        register_all(root)
        settings = ["threads=1", f"sandbox='{args.sandbox}'", f"grpo.groups={args.groups}", f"grpo.group_size={args.group_size}",
                    "rollout.max_new_tokens=64", "rollout.max_seq_len=16384", "warm_start.steps=0", "heldout.seeds=0",
                    f"audit.share={args.share}"]
        config = load_config(None, settings, model=str(model), output_dir=tempfile.mkdtemp() + "/run",
                             **{"grpo.iterations": args.iterations})
        run = GRPORun(manifest.gym_id, config)
        started = time.perf_counter()
        try:
            run.train()
            verdict = "no mismatch"
        except AuditMismatch as exc:
            verdict, failed = f"MISMATCH: {exc}", failed + 1
        wall = time.perf_counter() - started
        audit = run.pool.auditor
        print(f"{name}: share {args.share} iteration_s {[round(r.seconds, 1) for r in run.rows if r.phase == 'grpo']} "
              f"offered {audit.offered} audited {audit.audited} failed_replays {audit.errors} audit_s {audit.seconds:.1f} "
              f"wall_s {wall:.1f}: {verdict}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
