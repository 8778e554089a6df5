"""Scale-out: two CPU processes under `accelerate launch` (DDP over gloo) train one adapter together."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO_ROOT


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("accelerate") is None, reason="the accelerate launcher is not installed")
def test_two_processes_end_with_identical_adapters(tmp_path: Path, wifi_env: str, tiny_model: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}
    command = [
        "accelerate", "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
        "--dynamo_backend", "no", str(REPO_ROOT / "tests" / "trainer" / "ddp_worker.py"), str(tiny_model), wifi_env, str(tmp_path),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2]
    grpo = [[row for row in r["rows"] if row["phase"] == "grpo"] for r in ranks]
    assert grpo[0] == grpo[1]  # metrics are reduced over both ranks: the same numbers on each
    assert all(row["groups"] == 2 and row["rollouts"] == 8 for row in grpo[0])  # each rank rolled out one group
    assert sum(row["trained_rollouts"] for row in grpo[0]) > 0  # some GRPO step really ran
    first, second = torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt")
    assert first.keys() == second.keys() and first
    for name in first:
        assert torch.equal(first[name], second[name]), name
    assert any(float(t.abs().sum()) > 0 for n, t in first.items() if "lora_B" in n)  # trained, not the zero init
