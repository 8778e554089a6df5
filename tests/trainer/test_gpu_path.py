"""The GPU path, checked where there is none: models follow the run's device (the adapter-alone evaluation
included), training finishes without matplotlib, the benches take --sandbox, and bench_gpu.py refuses to run
without CUDA in one line while its CPU-side arguments and model configs stay right."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def test_run_device_is_the_accelerators_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer.model import run_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert run_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    assert run_device() == torch.device("cuda", 3)


def test_the_adapter_alone_evaluation_moves_the_policy_to_the_run_device(monkeypatch, tmp_path, wifi_env, tiny_model) -> None:  # type: ignore[no-untyped-def]
    """evaluate_adapter puts the policy where run_device() says before rolling out (it stayed on the CPU before)."""
    from trainer import heldout, model
    from trainer.config import load_config

    moved: list[object] = []
    original = torch.nn.Module.to

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        moved.extend(a for a in args if isinstance(a, torch.device))
        return original(self, *args, **kwargs)

    marker = torch.device("cpu", 0)  # an explicit device object only the evaluation's move passes
    monkeypatch.setattr(model, "run_device", lambda: marker)
    monkeypatch.setattr(torch.nn.Module, "to", spy)
    config = load_config(None, ["threads=1", "sandbox='bwrap'", "rollout.max_new_tokens=4", "rollout.max_seq_len=1024",
                                "heldout.seeds=1"], model=str(tiny_model), output_dir=str(tmp_path / "run"))
    result = heldout.evaluate_adapter(wifi_env, config, None)
    assert marker in moved and result.episodes == 1


def test_training_finishes_without_matplotlib(monkeypatch, tmp_path, wifi_env, tiny_model, capsys) -> None:  # type: ignore[no-untyped-def]
    from trainer.config import load_config
    from trainer.loop import GRPORun

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    with pytest.raises(ImportError):
        import matplotlib  # noqa: F401
    settings = ["threads=1", "sandbox='bwrap'", "grpo.groups=1", "grpo.group_size=2", "rollout.max_new_tokens=8",
                "rollout.max_seq_len=1024", "warm_start.steps=1", "heldout.seeds=1"]
    run = GRPORun(wifi_env, load_config(None, settings, model=str(tiny_model), output_dir=str(tmp_path / "run"),
                                        **{"grpo.iterations": 1}))
    result = run.train()
    assert result.curve is None and result.adapter_dir and (Path(result.adapter_dir) / "adapter_config.json").exists()
    assert (tmp_path / "run" / "metrics.jsonl").exists() and (tmp_path / "run" / "summary.json").exists()
    notes = [line for line in capsys.readouterr().err.splitlines() if "matplotlib" in line]
    assert len(notes) == 1 and notes[0].startswith("note: reward_curve.png not drawn: matplotlib is not installed")


@pytest.mark.parametrize("bench", ["bench_learning.py", "bench_train.py"])
def test_the_training_benches_take_a_sandbox(bench: str) -> None:
    out = subprocess.run([sys.executable, str(REPO / "bench" / bench), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "--sandbox" in out.stdout
    assert "sandbox='bwrap'" not in (REPO / "bench" / bench).read_text() and 'backend="bwrap"' not in (REPO / "bench" / bench).read_text()


def _bench_gpu():  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_gpu", REPO / "bench" / "bench_gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_gpu_refuses_without_cuda_in_one_line() -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is here: the bench would run")
    out = subprocess.run([sys.executable, str(REPO / "bench" / "bench_gpu.py")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stdout.strip().splitlines() == [_bench_gpu().NO_CUDA] and "needs a CUDA GPU" in out.stdout and not out.stderr.strip()


def test_bench_gpu_arguments() -> None:
    bench = _bench_gpu()
    args = bench.parse_args(["--models", "qwen3-8b", "--groups", "3", "--group-size", "4", "--micro-batch", "6"])
    assert args.models == ["qwen3-8b"] and args.groups * args.group_size == 12 and args.budget_s == 270.0
    assert bench.parse_args([]).models == ["qwen3-0.6b", "qwen3-8b"]
    for bad in (["--models", "llama"], ["--models", ""], ["--micro-batch", "5"], ["--group-size", "1"]):
        with pytest.raises(SystemExit) as exited:
            bench.parse_args(bad)
        assert exited.value.code == 2
    batch = bench.rollouts(bench.parse_args(["--groups", "2", "--group-size", "3", "--prompt-tokens", "5", "--completion-tokens", "4",
                                             "--micro-batch", "2"]), 100, 0)
    assert len(batch) == 6 and batch[0][0] == batch[2][0] != batch[3][0]  # a group shares its prompt
    assert all(len(p) == 5 and len(c) == 4 and max(p + c) < 100 for p, c, _ in batch)


@pytest.mark.parametrize("name", ["qwen3-0.6b", "qwen3-8b"])
def test_bench_gpu_models_have_the_real_shapes(name: str) -> None:
    """Built on the meta device (no memory, no download): the published parameter counts."""
    from transformers import AutoModelForCausalLM

    bench = _bench_gpu()
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(bench.qwen3_config(name))
    assert sum(p.numel() for p in model.parameters()) == bench.PARAMETERS[name]
    assert type(model).__name__ == "Qwen3ForCausalLM"
