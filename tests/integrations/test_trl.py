"""TRL's GRPOTrainer trains on a registered env through the shipped rollout_func, with configuration only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from integrations.trl import seed_dataset, seed_of, trace_env_reward, trace_grpo  # noqa: E402


def test_prompts_name_their_seeds() -> None:
    assert [seed_of(p) for p in ("seed 7", " 12 ", 3, [{"role": "user", "content": "seed 4"}])] == [7, 12, 3, 4]
    assert seed_dataset(3, first=5)["prompt"] == ["seed 5", "seed 6", "seed 7"]
    with pytest.raises(ValueError, match="names no scenario seed"):
        seed_of("What is the capital of France?")
    with pytest.raises(ValueError, match="pass rollout_func"):
        trace_env_reward(["x"])


@pytest.mark.slow
def test_grpo_trainer_trains_two_steps_through_the_rollout_func(vowels_id: str, tiny_model: Path, tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.manual_seed(0)
    config = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2, max_steps=2, learning_rate=5e-3,
        beta=0.0, temperature=0.7, use_cpu=True, report_to=[], save_strategy="no", logging_steps=1, bf16=False, disable_tqdm=True, seed=0,
    )
    kwargs = trace_grpo(vowels_id, seeds=8, max_new_tokens=12, max_seq_len=512)
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model), processing_class=AutoTokenizer.from_pretrained(tiny_model),
        args=config, peft_config=LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"), **kwargs,
    )
    rollout = kwargs["rollout_func"]
    try:
        trainer.train()
        assert trainer.state.global_step == 2
        lora_b = [p for name, p in trainer.model.named_parameters() if "lora_B" in name]
        assert lora_b and any(p.detach().abs().sum() > 0 for p in lora_b)  # LoRA starts with B = 0: the update moved it

        episodes = rollout.last
        assert len(episodes) == 4 and all(e.trainable and e.turns == 2 for e in episodes)
        for episode in episodes:  # sampled tokens, then the env's (the user's reply), then sampled tokens again
            mask = episode.sequence()[1][len(episode.prompt_ids):]
            assert mask[0] == 1 and mask[-1] == 1 and 0 in mask
        logged = [row for row in trainer.state.log_history if "reward" in row]
        assert len(logged) == 2
        assert logged[-1]["reward"] == pytest.approx(sum(e.reward for e in episodes) / 4, abs=1e-6)

        # log-probs of the sampled tokens are the policy's own, at the sampling temperature
        out = rollout(["seed 1"], trainer)
        model = trainer.model
        ids = torch.tensor([out["prompt_ids"][0] + out["completion_ids"][0]])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0].float() / config.temperature
        start = len(out["prompt_ids"][0])
        expected = torch.log_softmax(logits[start - 1: -1], dim=-1).gather(-1, ids[0, start:, None]).squeeze(-1)
        assert torch.allclose(torch.tensor(out["logprobs"][0]), expected, atol=1e-4)
        assert out["env_mask"][0] == rollout.last[0].sequence()[1][start:] and out["trace_env_reward"][0] == rollout.last[0].reward
    finally:
        rollout.close()
