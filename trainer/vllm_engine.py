"""Generation with vLLM (optional extra, GPU only): the base model stays in vLLM, the adapter is a LoRA.

The adapter being trained is never merged into the weights: after each update it is saved in PEFT's format
and handed to vLLM as a new ``LoRARequest`` (a new id, so vLLM loads the new weights). vLLM's prefix cache
plays the role of the transformers engine's KV cache across turns: a turn re-submits the conversation's
token ids and only the new tail is computed. Not exercised by the test suite (no GPU there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer.chat import ChatFormat
from trainer.config import TrainConfig
from trainer.engines import Generated
from trainer.errors import TrainError


class VLLMEngine:
    def __init__(self, config: TrainConfig, chat: ChatFormat, adapter_root: Path) -> None:
        try:
            from vllm import LLM, SamplingParams
        except ImportError:
            raise TrainError("rollout.engine = 'vllm' needs vLLM on a GPU machine: pip install vllm (not pinned; this path is untested here)") from None
        import torch

        if not torch.cuda.is_available():
            raise TrainError("rollout.engine = 'vllm' needs a CUDA GPU; use rollout.engine = 'transformers' on CPU")
        if config.gguf_file:
            raise TrainError("rollout.engine = 'vllm' does not load --gguf-file models here; use the transformers engine")
        self.chat = chat
        self.adapter_root = adapter_root
        self.llm = LLM(
            model=config.model, enable_lora=True, max_lora_rank=config.lora.rank, enable_prefix_caching=True,
            gpu_memory_utilization=config.rollout.vllm_gpu_memory_utilization, max_model_len=config.rollout.max_seq_len,
            seed=config.seed,
        )
        self.params = SamplingParams(
            temperature=config.rollout.temperature, top_p=1.0, top_k=-1, max_tokens=config.rollout.max_new_tokens,
            stop_token_ids=[chat.eos_id], skip_special_tokens=False,
        )
        self.lora: Any = None
        self.version = 0

    def sync(self, model: Any, step: int) -> None:
        """Save the current adapter and point vLLM at it (LoRA weights only; the base is untouched). Each
        sync is a new LoRA id, so vLLM loads the new weights instead of serving its cached copy."""
        from vllm.lora.request import LoRARequest

        self.version += 1
        folder = self.adapter_root / f"v{self.version:06d}-step{step}"
        model.save_pretrained(str(folder))
        self.lora = LoRARequest(f"policy-v{self.version}", self.version, str(folder))

    def session(self, prompts: dict[int, list[int]]) -> "VLLMSession":
        return VLLMSession(self, prompts)


class VLLMSession:
    def __init__(self, engine: VLLMEngine, prompts: dict[int, list[int]]) -> None:
        self.engine = engine
        self.tokens = {k: list(v) for k, v in prompts.items()}

    def extend(self, key: int, tokens: list[int]) -> None:
        self.tokens[key].extend(tokens)

    def drop(self, keys: list[int]) -> None:
        for key in keys:
            self.tokens.pop(key, None)

    def generate(self) -> dict[int, Generated]:
        keys = list(self.tokens)
        requests = [{"prompt_token_ids": self.tokens[k]} for k in keys]
        outputs = self.engine.llm.generate(requests, self.engine.params, lora_request=self.engine.lora, use_tqdm=False)
        eos = self.engine.chat.eos_id
        results: dict[int, Generated] = {}
        for key, output in zip(keys, outputs):
            completion = output.outputs[0]
            tokens = list(completion.token_ids)
            ended = completion.finish_reason == "stop"
            if ended and (not tokens or tokens[-1] != eos):
                tokens.append(eos)
            self.tokens[key].extend(tokens)
            results[key] = Generated(tokens, ended)
        return results
