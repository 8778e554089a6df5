"""A local Hugging Face model (optionally with a PEFT adapter) as a rollout policy.

``hf:PATH`` loads ``AutoModelForCausalLM`` and its tokenizer from a folder (or hub id already in the local
cache); ``hf:PATH@ADAPTER`` adds a PEFT adapter on top. Each turn renders the conversation with the
model's own chat template, tools included (``apply_chat_template(..., tools=...)``), generates, and
returns the raw text: the target parses ``<tool_call>`` blocks as it would from any policy.

One model serves every episode of a rollout; generation is serialised by a lock (on CPU, parallel
``generate`` calls would only compete for the same cores). Sampling is seeded per (episode, turn).
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from env_registry.targets.tasks import Task
from factory.errors import FactoryError
from factory.rollout.policies import Act, Action, Policy, PolicyError


def _split_spec(spec: str) -> tuple[str, str | None]:
    """``hf:PATH[@ADAPTER]`` -> (PATH, ADAPTER or None)."""
    body = spec.removeprefix("hf:")
    if "@" not in body:
        return body, None
    model, _, adapter = body.rpartition("@")
    return model, adapter or None


def chat_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI messages as chat templates expect them: tool-call arguments as objects, not JSON strings."""
    out = []
    for message in messages:
        item = {k: v for k, v in message.items() if v is not None}
        calls = []
        for call in message.get("tool_calls") or []:
            function = dict(call.get("function") or {})
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except (json.JSONDecodeError, TypeError):
                arguments = function.get("arguments")
            calls.append({**call, "function": {**function, "arguments": arguments}})
        if calls:
            item["tool_calls"] = calls
        item.setdefault("content", "")
        out.append(item)
    return out


class HFPolicy(Policy):
    def __init__(self, model: Any, tokenizer: Any, spec: str, temperature: float | None = 0.0, max_new_tokens: int = 512) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.spec = spec
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self._lock = threading.Lock()

    @classmethod
    def from_spec(cls, spec: str, *, temperature: float | None = 0.0, max_new_tokens: int = 512) -> "HFPolicy":
        path, adapter = _split_spec(spec)
        if not path:
            raise FactoryError(f"--policy {spec!r} names no model; expected hf:PATH or hf:PATH@ADAPTER")
        for label, folder in (("model", path), ("adapter", adapter)):
            if folder and ("/" in folder or folder.startswith(".")) and not Path(folder).expanduser().exists():
                raise FactoryError(f"--policy {spec!r}: {label} folder {folder} does not exist")
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
            from transformers.utils import logging as hf_logging
        except ImportError:
            raise FactoryError("hf: policies need transformers and torch: pip install 'trace-factory[train]'") from None
        hf_logging.disable_progress_bar()  # our own progress bar is the one to watch
        try:
            where = str(Path(path).expanduser()) if Path(path).expanduser().exists() else path
            tokenizer = AutoTokenizer.from_pretrained(where)
            model = AutoModelForCausalLM.from_pretrained(where)
            if adapter:
                try:
                    from peft import PeftModel
                except ImportError:
                    raise FactoryError("an @ADAPTER needs peft: pip install 'trace-factory[train]'") from None
                model = PeftModel.from_pretrained(model, str(Path(adapter).expanduser()))
        except FactoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - transformers raises many types for a bad folder
            raise FactoryError(f"--policy {spec!r}: cannot load: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}") from None
        if getattr(tokenizer, "chat_template", None) is None:
            raise FactoryError(f"--policy {spec!r}: the tokenizer has no chat template, so tools cannot be rendered")
        model.eval()
        return cls(model, tokenizer, spec, temperature, max_new_tokens)

    def start(self, task: Task, tools: list[dict[str, Any]], seed: int) -> Act:
        turn = iter(range(1_000_000))

        def act(messages: list[dict[str, Any]]) -> Action:
            return self.generate(messages, tools, seed, next(turn))

        return act

    def generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], seed: int, turn: int) -> str:
        import torch

        try:
            inputs = self.tokenizer.apply_chat_template(
                chat_messages(messages), tools=tools, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
            )
        except Exception as exc:  # noqa: BLE001 - template errors come as jinja or value errors
            raise PolicyError(f"policy {self.spec}: chat template failed: {type(exc).__name__}: {exc}") from None
        inputs = inputs.to(self.model.device)  # a model on a GPU (factory eval --device cuda) takes its inputs there
        sample = bool(self.temperature and self.temperature > 0)
        options: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": sample}
        if sample:
            options["temperature"] = self.temperature
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        digest = hashlib.sha256(f"{seed}:{turn}".encode()).digest()
        with self._lock, torch.no_grad():
            torch.manual_seed(int.from_bytes(digest[:8], "big") % (2**63))
            output = self.model.generate(**inputs, pad_token_id=pad, **options)
        new_tokens = output[0][inputs["input_ids"].shape[1] :]
        text = self.tokenizer.decode(new_tokens, skip_special_tokens=False)
        for token in {self.tokenizer.eos_token, self.tokenizer.pad_token, "<|im_end|>", "<|endoftext|>"} - {None}:
            text = text.split(token)[0] if token == "<|im_end|>" else text.replace(token, "")
        return text.strip()
