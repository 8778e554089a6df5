"""A tiny Qwen3-style chat model with a tool-calling chat template, built offline in a second.

No model weights can be downloaded where tests and smoke runs happen, so this builds one locally: a
byte-level BPE tokenizer trained on a few hundred KB of text (the shipped target profiles' tool schemas
and policies plus chat scaffolding), a ChatML template that renders tools, tool calls and tool results the
way Qwen's does, and a 2-layer Qwen3 model with random weights. ``initializer_range`` is 0.1 rather than
the usual 0.02: at 0.02 the logits are nearly uniform and LoRA-only training barely moves the output.

    path = ensure_tiny_model()                    # cached under ~/.cache/trace-factory/models
    model = AutoModelForCausalLM.from_pretrained(path)

``python -m trainer.tiny_model OUT_DIR`` writes one to a folder.

LoRA-only training has a ceiling on such a model: the embeddings are tied and frozen, so the largest
logit is about ``initializer_range * hidden_size`` (6.4 at 64 dims) against a log-sum-exp over the other
2k tokens of about 8 - no token can ever get more than ~20% probability (at 128 dims ~99% per token,
which still caps a 21-token tool call at ~80%). ``LORA_TRAINABLE`` (256 dims, ~2M parameters, no
practical ceiling) is the spec for tests that must teach the model an exact tool call.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

IM_START, IM_END, END_OF_TEXT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
EXTRA_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>")

CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages and messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\nCall a function by writing <tool_call>{\"name\": NAME, \"arguments\": {...}}</tool_call>. "
    "Functions:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools><|im_end|>\\n' }}"
    "{%- elif messages and messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}"
    "{{- '<|im_start|>user\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if message.content %}{{- message.content }}{%- endif %}"
    "{%- for call in message.tool_calls or [] %}"
    "{%- set arguments = call.function.arguments %}"
    "{%- if arguments is not string %}{%- set arguments = arguments | tojson %}{%- endif %}"
    "{%- if message.content or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>{\"name\": \"' + call.function.name + '\", \"arguments\": ' + arguments + '}</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>' + message.content + '</tool_response><|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@dataclass(frozen=True)
class TinySpec:
    """Everything that decides the model's bytes; its hash names the cache folder."""

    vocab_size: int = 2048
    hidden_size: int = 64
    intermediate_size: int = 192
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 16384
    initializer_range: float = 0.1
    seed: int = 0
    format_version: int = 1

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


LORA_TRAINABLE = TinySpec(hidden_size=256, intermediate_size=768)
"""Wide enough that LoRA alone can make a token near-certain (see the module docs)."""


def _corpus() -> list[str]:
    """Text the tokenizer learns from: what its prompts will be made of (tools, policies, chat, JSON calls)."""
    from trace_env import targets

    texts = [
        "Hello! How can I help you today? I would like to cancel my reservation. Sure, let me look that up.",
        "Thanks, that's all I needed. Could you confirm? Yes, please go ahead. I'm sorry, I cannot do that.",
        '<tool_call>{"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}</tool_call>',
        "<tool_response>{\"status\": \"ok\"}</tool_response> 0 1 2 3 4 5 6 7 8 9 A B C D E F true false null",
    ]
    for target_id in targets.builtin_target_ids():
        text = targets.profile_text(target_id)
        texts.append(text)
        texts.append(targets.policy(target_id))
        for name in targets.tool_names(target_id):
            texts.append(json.dumps(targets.tool_schema(target_id, name)))
            texts.append(f'<tool_call>{{"name": "{name}", "arguments": {{}}}}</tool_call>')
    return texts


def _tokenizer(spec: TinySpec):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special = [END_OF_TEXT, IM_START, IM_END]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=IM_END, pad_token=END_OF_TEXT, bos_token=None, unk_token=None,
        additional_special_tokens=[IM_START],
    )
    tokenizer.add_tokens(list(EXTRA_TOKENS))
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.model_max_length = spec.max_position_embeddings
    return tokenizer


def build_tiny_model(out_dir: str | Path, spec: TinySpec | None = None) -> Path:
    """Write tokenizer, config and random weights to ``out_dir`` (created); returns it."""
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    spec = spec or TinySpec()
    out = Path(out_dir)
    tokenizer = _tokenizer(spec)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        head_dim=spec.hidden_size // spec.num_attention_heads,
        max_position_embeddings=spec.max_position_embeddings,
        initializer_range=spec.initializer_range,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(spec.seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True, temperature=1.0
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "tiny_spec.json").write_text(json.dumps(asdict(spec), indent=2) + "\n")
    return out


def default_model_cache() -> Path:
    base = os.environ.get("TRACE_FACTORY_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "trace-factory")
    return Path(base) / "models"


def ensure_tiny_model(cache_dir: str | Path | None = None, spec: TinySpec | None = None) -> Path:
    """The tiny model for ``spec``, built once per spec and cached; concurrent callers agree (atomic rename)."""
    spec = spec or TinySpec()
    root = Path(cache_dir) if cache_dir is not None else default_model_cache()
    final = root / f"tiny-qwen3-{spec.digest()}"
    if (final / "tiny_spec.json").exists():
        return final
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tiny-", dir=root))
    try:
        build_tiny_model(staging, spec)
        try:
            os.rename(staging, final)
        except OSError:  # another process finished first; its copy is identical
            pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


if __name__ == "__main__":  # pragma: no cover - a convenience for people
    if len(sys.argv) != 2:
        print("usage: python -m trainer.tiny_model OUT_DIR", file=sys.stderr)
        sys.exit(2)
    print(build_tiny_model(sys.argv[1]))
