"""Run by tests/trainer/test_distributed.py under `accelerate launch`: each rank trains, then writes its
own copy of the adapter weights and its metrics so the test can compare the ranks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from peft import get_peft_model_state_dict

from trainer.config import load_config
from trainer.loop import GRPORun


def main(model: str, env_id: str, out: Path) -> None:
    settings = load_config(None, [
        "threads=1", "sandbox='bwrap'", "grpo.groups=2", "grpo.group_size=4", "grpo.lr=1e-3", "grpo.micro_batch_size=2",
        "rollout.max_new_tokens=24", "rollout.max_seq_len=1024", "warm_start.steps=12", "warm_start.lr=1e-2",
        "save_every=10",
    ], model=model, output_dir=str(out / "run"), **{"grpo.iterations": 2})
    run = GRPORun(env_id, settings)
    rank = run.accelerator.process_index
    run.train()
    state = {k: v.detach().clone() for k, v in get_peft_model_state_dict(run.policy).items()}
    torch.save(state, out / f"rank{rank}.pt")
    rows = [r.model_dump() for r in run.rows]
    (out / f"rank{rank}.json").write_text(json.dumps({"world": run.accelerator.num_processes, "rows": rows}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
