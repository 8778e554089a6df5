"""The shipped rollout_func honours the trainer's generation settings: max_completion_length per turn and per
episode, top_k and generation_kwargs on the transformers path, and TRL's own vLLM when use_vllm is on."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from integrations.trl import trace_grpo  # noqa: E402


def trainer_for(env_id: str, tiny_model: Path, tmp_path: Path, **config: Any) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_generations=2, max_steps=1, beta=0.0,
                      use_cpu=True, report_to=[], save_strategy="no", bf16=False, disable_tqdm=True, seed=0, **config)
    kwargs = trace_grpo(env_id, seeds=2, max_seq_len=512)
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(tiny_model), processing_class=AutoTokenizer.from_pretrained(tiny_model),
                          args=args, **kwargs)
    return trainer, kwargs["rollout_func"]


def sampled_runs(mask: list[int]) -> list[int]:
    """Lengths of the runs of sampled tokens: one per assistant turn."""
    runs, current = [], 0
    for bit in mask + [0]:
        if bit:
            current += 1
        elif current:
            runs.append(current)
            current = 0
    return runs


def test_max_completion_length_caps_each_turn_and_the_episode(vowels_id: str, tiny_model: Path, tmp_path: Path) -> None:
    import torch

    torch.manual_seed(0)
    trainer, rollout = trainer_for(vowels_id, tiny_model, tmp_path, max_completion_length=20)
    try:
        out = rollout(["seed 1", "seed 2"], trainer)
        runs = [run for episode in rollout.last for run in sampled_runs(episode.sequence()[1][len(episode.prompt_ids):])]
        assert len(runs) == 4 and max(runs) <= 20 and 20 in runs  # the random tiny model talks until the cap stops it
        assert all(len(ids) <= 20 for ids in out["completion_ids"])
        for episode, reward, mask in zip(rollout.last, out["trace_env_reward"], out["env_mask"]):
            whole = len(episode.sequence()[0]) - len(episode.prompt_ids)
            assert (reward is None) == (whole > 20)  # over budget: cut there, no advantage
            assert reward is not None or not any(mask)
    finally:
        rollout.close()


def test_top_k_from_generation_kwargs_reaches_the_sampler(vowels_id: str, tiny_model: Path, tmp_path: Path) -> None:
    import torch

    first_turns = {}
    for name, extra in (("default", {}), ("greedy", {"generation_kwargs": {"top_k": 1}})):
        torch.manual_seed(0)
        trainer, rollout = trainer_for(vowels_id, tiny_model, tmp_path / name, max_completion_length=12, **extra)
        try:
            out = rollout(["seed 1", "seed 1"], trainer)
            first_turns[name] = [ids[:12] for ids in out["completion_ids"]]
            assert rollout.last_engine.config.top_k == (1 if extra else None)
        finally:
            rollout.close()
    assert first_turns["greedy"][0] == first_turns["greedy"][1]  # top_k=1 at temperature 1: one possible sample
    assert first_turns["default"][0] != first_turns["default"][1]  # without it the two samples differ


def test_turns_are_generated_by_trls_vllm_when_use_vllm_is_on(vowels_id: str, tiny_model: Path, tmp_path: Path) -> None:
    pytest.importorskip("vllm", reason="vLLM is not importable here: the use_vllm path of rollout_func runs where it is (a CUDA GPU)")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("vLLM is importable but there is no CUDA GPU for it")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from integrations.trl_vllm import TRLVLLMEngine

    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_generations=2, max_steps=1, beta=0.0,
                      report_to=[], save_strategy="no", seed=0, use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3,
                      max_completion_length=16, generation_kwargs={"top_k": 1})
    kwargs = trace_grpo(vowels_id, seeds=2, max_seq_len=512)
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(tiny_model), processing_class=AutoTokenizer.from_pretrained(tiny_model),
                          args=args, **kwargs)
    rollout = kwargs["rollout_func"]
    try:
        trainer.train()
        assert trainer.state.global_step == 1 and isinstance(rollout.last_engine, TRLVLLMEngine)
        runs = [run for episode in rollout.last for run in sampled_runs(episode.sequence()[1][len(episode.prompt_ids):])]
        assert runs and max(runs) <= 16
    finally:
        rollout.close()
