"""Helpers shared by router tests: renamed copies of the tiny env, gated registration, the plain base
model, greedy generation."""

from __future__ import annotations

from pathlib import Path

from env_registry.registry import Registry
from factory.validation.gate import Gate, validate_source
from schemas.validation import ValidationConfig

TINY_ENV = Path(__file__).resolve().parents[1] / "gate" / "envs" / "tiny_checked.py"  # passes the whole gate
# Three capabilities of the built-in catalogue, each standing on a renamed copy of the tiny test env.
CAPABILITIES = {
    "precondition_verification": "Check a reservation's state before changing it.",
    "permission_error_recovery": "Recover from a refused tool call instead of repeating it.",
    "multi_step_task_completion": "Carry out every step a request needs.",
}
# A light gate: the full one runs in the gate's own tests; here it only has to admit a known-good env. Its run
# seed is fixed: at these sample sizes a share near its line may stay inconclusive on some draws (by design).
LIGHT_GATE = ValidationConfig(
    run_seed=1, solvability_seeds=8, necessity_seeds=8, diversity_seeds=16, grpo_seeds=4, grpo_group_size=4, fuzz_examples=8
)


def variant_source(capability: str, description: str) -> str:
    source = TINY_ENV.read_text()
    source = source.replace('capability = "tiny_cancel"', f'capability = "{capability}"')
    return source.replace(
        'description = "Cancel a reservation only when it is refundable."', f'description = "{description}"'
    )


def register_gated(root: Path, source: str) -> None:
    """What `factory build` does: validate in the sandbox, register only if the gate passes."""
    report = validate_source(source, Gate(config=LIGHT_GATE))
    assert report.passed, [c.message for c in report.checks if not c.passed]
    info = report.env_info
    Registry(root).put(
        source, capability=info["capability"], target=info["target"], tools=info["tools"], max_steps=info["max_steps"],
        description=info["description"], report=report.model_dump(mode="json"), validation="passed",
    )  # fmt: skip


def load_plain(path: Path):
    """A fresh copy of the base model with no PEFT anywhere near it."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    return AutoModelForCausalLM.from_pretrained(path).eval()


def greedy(model, tokenizer, text: str = "Please cancel my reservation.", tokens: int = 24) -> list[int]:
    import torch

    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return out[0, ids["input_ids"].shape[1] :].tolist()
