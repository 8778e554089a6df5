"""Generation with vLLM (optional extra, GPU only): the base model stays in vLLM, the adapter is a LoRA.

The adapter being trained is never merged into the weights: after each update it is saved in PEFT's format
and handed to vLLM as a new ``LoRARequest`` (a new id, so vLLM loads the new weights). vLLM's prefix cache
plays the role of the transformers engine's KV cache across turns: a turn re-submits the conversation's
token ids and only the new tail is computed. It also shares a group's prompt: before the first turn, one
prompt per shared prefix (:mod:`trainer.prefix`) is prefilled on its own (one sampled token, thrown away),
so the group's other requests find the prefix cached rather than racing to compute it in the same step.
Turns stop where the transformers engine's do (:func:`trainer.engines.stop_rule`). Not exercised by the
test suite (no GPU there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer.chat import ChatFormat
from trainer.config import TrainConfig
from trainer.engines import Generated, stop_rule
from trainer.errors import TrainError
from trainer.prefix import shared_prefixes


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
        self.stops = stop_rule(chat, _declared_eos(config))
        self.params = SamplingParams(
            temperature=config.rollout.temperature, top_p=1.0, top_k=-1, max_tokens=config.rollout.max_new_tokens,
            stop_token_ids=self.stops.token_ids, stop=self.stops.strings or None, include_stop_str_in_output=True,
            skip_special_tokens=False,
        )
        self.warm_params = SamplingParams(temperature=1.0, max_tokens=1)
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


def _declared_eos(config: TrainConfig) -> Any:
    """The model's own end-of-turn ids, from its generation_config.json (None when it has none)."""
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(config.model).eos_token_id
    except (OSError, ValueError):
        return None


class VLLMSession:
    def __init__(self, engine: VLLMEngine, prompts: dict[int, list[int]]) -> None:
        self.engine = engine
        self.tokens = {k: list(v) for k, v in prompts.items()}
        self.warm = False

    def _warm_prefixes(self) -> None:
        """Prefill one prompt of each shared prefix, so the others hit vLLM's prefix cache."""
        prompts = list(self.tokens.values())
        firsts = [prompts[c.members[0]] for c in shared_prefixes(prompts) if len(c.members) > 1]
        if firsts:
            self.engine.llm.generate([{"prompt_token_ids": p} for p in firsts], self.engine.warm_params,
                                     lora_request=self.engine.lora, use_tqdm=False)

    def extend(self, key: int, tokens: list[int]) -> None:
        self.tokens[key].extend(tokens)

    def drop(self, keys: list[int]) -> None:
        for key in keys:
            self.tokens.pop(key, None)

    def generate(self) -> dict[int, Generated]:
        if not self.warm:
            self.warm = True
            self._warm_prefixes()
        keys = list(self.tokens)
        requests = [{"prompt_token_ids": self.tokens[k]} for k in keys]
        outputs = self.engine.llm.generate(requests, self.engine.params, lora_request=self.engine.lora, use_tqdm=False)
        eos = self.engine.chat.eos_id
        results: dict[int, Generated] = {}
        for key, output in zip(keys, outputs):
            completion = output.outputs[0]
            tokens = list(completion.token_ids)
            by_string = isinstance(completion.stop_reason, str)  # a stop string; else a stop token or the eos
            finished = completion.finish_reason == "stop"
            if finished and not by_string and (not tokens or tokens[-1] not in self.engine.stops.token_ids):
                tokens.append(eos)
            ended = finished and not by_string and tokens[-1] == eos
            self.tokens[key].extend(tokens)
            results[key] = Generated(tokens, ended, finished and not ended)
        return results
