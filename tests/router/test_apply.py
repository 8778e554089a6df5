"""Applying a decision: the base model exactly for "no adapter", the chosen adapter otherwise, soft mixes,
merges, and the vLLM / OpenAI-compatible code paths."""

from __future__ import annotations

import pytest
import torch

from router.apply_peft import AdapterSet
from router.apply_vllm import lora_modules_arg, lora_request, routed_spec, served_model
from router.decide import Router
from router.errors import RouterError
from router.schema import RouteDecision, RouterConfig
from tests.router.helpers import greedy, load_plain

TASK = "Hi, I need to cancel reservation ZFA04Y, I booked it by mistake."
# The tiny model strongly prefers the label "1" (see test_debias), so the option holding "1" is chosen:
BASE_GETS_1 = ["2", "3", "4", "1"]  # the "no adapter" option comes last in the menu
FIRST_GETS_1 = ["1", "2", "3", "4"]


@pytest.fixture
def adapters(tiny_path, adapter_dirs) -> AdapterSet:
    return AdapterSet.load(load_plain(tiny_path), adapter_dirs)


def single(tiny_path, adapter_dirs, name: str):
    from peft import PeftModel

    return PeftModel.from_pretrained(load_plain(tiny_path), str(adapter_dirs[name])).eval()


def test_the_no_adapter_label_gives_the_base_model_byte_for_byte(adapters, plain_model, tokenizer, menu) -> None:
    decision = Router(adapters.model, tokenizer, menu, RouterConfig(alphabet=BASE_GETS_1)).route(TASK)
    assert decision.choice is None and decision.label == "1" and decision.weights == {}
    adapters.apply("precondition_verification")  # something else was active before
    assert adapters.apply(decision) is None
    routed, base = greedy(adapters.model, tokenizer), greedy(plain_model, tokenizer)
    assert routed == base
    assert tokenizer.decode(routed).encode() == tokenizer.decode(base).encode()
    assert set(adapters.model.peft_config) >= set(menu.capabilities)  # disabled, not unloaded


def test_an_applied_adapter_changes_the_output_and_is_the_chosen_one(adapters, plain_model, tiny_path, adapter_dirs, tokenizer, menu) -> None:
    decision = Router(adapters.model, tokenizer, menu, RouterConfig(alphabet=FIRST_GETS_1)).route(TASK)
    assert decision.choice == menu.capabilities[0] and decision.weights == {decision.choice: 1.0}
    assert adapters.apply(decision) == decision.choice
    routed = greedy(adapters.model, tokenizer)
    assert routed != greedy(plain_model, tokenizer)
    assert routed == greedy(single(tiny_path, adapter_dirs, decision.choice), tokenizer)


def test_switching_back_and_forth_reproduces_each_state(adapters, plain_model, tiny_path, adapter_dirs, tokenizer) -> None:
    a, b = "precondition_verification", "permission_error_recovery"
    want = {a: greedy(single(tiny_path, adapter_dirs, a), tokenizer), b: greedy(single(tiny_path, adapter_dirs, b), tokenizer), None: greedy(plain_model, tokenizer)}
    assert len({tuple(v) for v in want.values()}) == 3
    for name in (a, None, b, a, None, b):
        adapters.apply(name)
        assert greedy(adapters.model, tokenizer) == want[name], name
    with adapters.applied(a):
        assert greedy(adapters.model, tokenizer) == want[a]
    assert greedy(adapters.model, tokenizer) == want[None]  # the context leaves the base model active


def test_a_soft_mix_is_the_weighted_sum_of_the_adapters(adapters, tokenizer) -> None:
    weights = {"precondition_verification": 0.7, "multi_step_task_completion": 0.3}
    decision = RouteDecision(choice="precondition_verification", label="A", probabilities={}, weights=weights, mode="soft")
    name = adapters.apply(decision)
    assert name.startswith("mix_") and adapters.apply(decision) == name  # a repeated mix is reused
    layer = adapters.model.base_model.model.model.layers[0].self_attn.q_proj
    mixed = layer.get_delta_weight(name)
    expected = sum(w * layer.get_delta_weight(c) for c, w in weights.items())
    assert torch.allclose(mixed, expected, atol=1e-6) and mixed.abs().max() > 0
    mix_out = greedy(adapters.model, tokenizer)
    for capability in weights:
        adapters.apply(capability)
        assert greedy(adapters.model, tokenizer) != mix_out


def test_an_exported_mix_loads_as_a_plain_peft_adapter(adapters, tiny_path, tokenizer, tmp_path) -> None:
    from peft import PeftModel

    weights = {"permission_error_recovery": 0.6, "multi_step_task_completion": 0.4}
    decision = RouteDecision(choice="permission_error_recovery", label="B", probabilities={}, weights=weights, mode="soft")
    folder = adapters.export(decision, tmp_path / "mix")
    in_memory = greedy(adapters.model, tokenizer)
    reloaded = PeftModel.from_pretrained(load_plain(tiny_path), str(folder)).eval()
    assert greedy(reloaded, tokenizer) == in_memory


def test_merge_mode_gives_the_same_output_and_survives_routing(tiny_path, adapter_dirs, tokenizer, menu) -> None:
    from router.frozen import merged_adapters

    plain = AdapterSet.load(load_plain(tiny_path), adapter_dirs)
    merged = AdapterSet.load(load_plain(tiny_path), adapter_dirs, merge=True)
    name = "permission_error_recovery"
    plain.apply(name)
    merged.apply(name)
    assert merged_adapters(merged.model) == [name] and not merged_adapters(plain.model)
    assert greedy(merged.model, tokenizer) == greedy(plain.model, tokenizer)
    Router(merged.model, tokenizer, menu).route(TASK)  # a disabled forward pass unmerges; routing merges back
    assert merged_adapters(merged.model) == [name]
    merged.apply(None)
    assert not merged_adapters(merged.model)


def test_vllm_requests_name_the_chosen_adapter(adapter_dirs) -> None:
    hard = RouteDecision(choice="permission_error_recovery", label="B", probabilities={}, weights={"permission_error_recovery": 1.0})
    base = RouteDecision(choice=None, label="D", probabilities={})
    soft = RouteDecision(choice="permission_error_recovery", label="B", probabilities={}, weights={"permission_error_recovery": 0.6, "multi_step_task_completion": 0.4}, mode="soft")
    assert lora_request(base, adapter_dirs) is None
    assert served_model(hard, "Qwen/Qwen3-8B") == "permission_error_recovery"
    assert served_model(base, "Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"
    with pytest.raises(RouterError, match="one LoRA per request"):
        served_model(soft, "Qwen/Qwen3-8B")
    assert lora_modules_arg(adapter_dirs).count("=") == 3
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(RouterError, match="pip install vllm"):
            lora_request(hard, adapter_dirs)
    else:  # pragma: no cover - only where vLLM is installed
        request = lora_request(hard, adapter_dirs)
        assert request.lora_name == "permission_error_recovery" and request.lora_int_id == 2


def test_an_openai_compatible_server_is_asked_for_the_adapter_by_name() -> None:
    from llm_clients.spec import LLMSpec, make_client
    from factory.testing.llm_server import ScriptedLLMServer

    hard = RouteDecision(choice="precondition_verification", label="A", probabilities={}, weights={"precondition_verification": 1.0})
    base = RouteDecision(choice=None, label="D", probabilities={})
    with ScriptedLLMServer(["from the adapter", "from the base"]) as server:
        spec = LLMSpec(provider="openai-compatible", model="tiny-base", base_url=server.openai_base_url)
        for decision in (hard, base):
            make_client(routed_spec(spec, decision), cache=False, env={}).complete([{"role": "user", "content": "hi"}])
    assert [r.body["model"] for r in server.requests] == ["precondition_verification", "tiny-base"]
