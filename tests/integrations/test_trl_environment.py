"""TRL's environment_factory on a registered env: GRPOTrainer trains with the documented line and nothing else,
the tools TRL renders carry the env's full schemas, the simulated user answers through a tool, and the reward and
its components are the env's."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from integrations.trl_env import environment_factory, inline_refs, tool_method, trace_environment, trace_environment_reward  # noqa: E402
from tests.conftest import REPO_ROOT, TEST_ENVS  # noqa: E402
from trace_env.loader import load_env  # noqa: E402

TINY = load_env((TEST_ENVS / "tiny_cancel.py").read_text())
BLUEPRINTS = sorted((REPO_ROOT / "factory" / "blueprints").glob("[!_]*.py"))


def rendered(tool: dict[str, Any]) -> dict[str, Any]:
    """The schema TRL puts in the prompt for our method: transformers' get_json_schema, as apply_chat_template does."""
    from transformers.utils import get_json_schema

    return get_json_schema(tool_method(tool))["function"]


def shape(schema: Any) -> Any:
    """What a schema constrains, without prose: types, enums, item types; an object's properties as their names."""
    if not isinstance(schema, dict):
        return schema
    if schema.get("type") == "object" and schema.get("properties"):
        return {"type": "object", "fields": sorted(schema["properties"])}
    options = schema.get("anyOf")
    if options and all(isinstance(o, dict) and o.get("type") == "object" for o in options):
        fields = sorted({f for o in options for f in (o.get("properties") or {})})
        return {"type": "object", "fields": fields} if fields else {"type": "object"}
    return {k: shape(v) for k, v in schema.items() if k in ("type", "enum", "items", "anyOf", "additionalProperties") and v is not True}


@pytest.mark.parametrize("blueprint", BLUEPRINTS, ids=lambda p: p.stem)
def test_every_blueprint_tool_reaches_trl_with_its_full_schema(blueprint: Path) -> None:
    env = load_env(blueprint.read_text())
    for tool in env.tools():
        want = inline_refs(tool["function"]["parameters"])
        got = rendered(tool)
        assert got["name"] == tool["function"]["name"]
        assert set(got["parameters"].get("required", [])) == set(want.get("required", []))
        for name, schema in want["properties"].items():
            expected, actual = shape(schema), dict(got["parameters"]["properties"][name])
            fields = expected.pop("fields", []) if isinstance(expected, dict) else []
            items = expected.get("items") if isinstance(expected, dict) else None
            if isinstance(items, dict) and "fields" in items:
                fields = items.pop("fields")
            assert shape(actual) == expected, (tool["function"]["name"], name)
            assert all(f'"{field}"' in actual["description"] for field in fields), (name, actual["description"])


def test_enums_array_items_and_unions_survive() -> None:
    tool = {"type": "function", "function": {"name": "book", "description": "Book seats.", "parameters": {
        "type": "object", "required": ["cabin", "seats"], "properties": {
            "cabin": {"type": "string", "enum": ["business", "economy"], "description": "Cabin."},
            "seats": {"type": "array", "items": {"type": "integer"}},
            "tags": {"type": "array", "items": {"enum": ["window", "aisle"]}},
            "note": {"type": ["string", "null"]},
            "extras": {"type": "object", "additionalProperties": {"type": "number"}},
        }}}}
    props = rendered(tool)["parameters"]["properties"]
    assert props["cabin"]["enum"] == ["business", "economy"] and props["cabin"]["type"] == "string"
    assert props["seats"] == {"type": "array", "items": {"type": "integer"}, "description": "seats"}
    assert props["tags"]["items"] == {"type": "string", "enum": ["window", "aisle"]}
    assert (props["note"]["type"], props["note"]["nullable"]) == ("string", True)  # transformers writes null so
    assert props["extras"]["additionalProperties"] == {"type": "number"}
    assert rendered(tool)["parameters"]["required"] == ["cabin", "seats"]


def play_gym(env: Any, seed: int) -> tuple[float, dict[str, float]]:
    """The reference solution through an open gym.make env (OpenAI tool-call messages, then text)."""
    env.reset(seed=seed)
    for turn in TINY.reference_solution(TINY.generate(seed)):
        if turn.tool_calls:
            call = turn.tool_calls[0]
            action = {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}]}
        else:
            action = turn.content
        _, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return reward, info["reward_components"]
    _, reward, _, _, info = env.unwrapped.truncate()
    return reward, info["reward_components"]


def test_tools_the_user_and_the_reward_match_gym_make(tiny_id: str) -> None:
    """Calls as TRL's loop makes them (method(**arguments)) get the rewards gym.make gives the same turns."""
    factory = environment_factory(tiny_id)
    environment, reference = factory(), gym.make(tiny_id)
    try:
        names = {n for n in dir(type(environment)) if not n.startswith("_") and callable(getattr(type(environment), n))}
        assert names == {"reset", "send_message_to_user", "get_reservation_details", "cancel_reservation"}
        for seed in (1, 2):  # one refundable reservation, one not
            assert environment.reset(seed=seed, prompt=[]) is None
            for turn in TINY.reference_solution(TINY.generate(seed)):
                if turn.tool_calls:
                    call = turn.tool_calls[0]
                    result = getattr(environment, call.name)(**call.arguments)
                    assert TINY.generate(seed).user["reservation_id"] in result
                else:
                    reply = environment.send_message_to_user(message=turn.content)
                    assert reply and environment.messages[-1]["role"] == "user"
            assert (environment._grade(), environment.reward_components) == play_gym(reference, seed)
        environment.reset(seed=1)
        assert "not found" in environment.get_reservation_details(reservation_id="NOPE00")  # the env's error, as a result
        assert environment._grade() < play_gym(reference, 1)[0]
    finally:
        environment._close()
        reference.close()


def test_the_final_reply_reaches_the_user_and_components_are_logged(tiny_id: str) -> None:
    factory = environment_factory(tiny_id)
    environments = [factory(), factory()]
    logged: dict[str, float] = {}
    try:
        for environment in environments:
            environment.reset(seed=1)
        rid = TINY.generate(1).user["reservation_id"]
        environments[0].get_reservation_details(reservation_id=rid)
        completions = [[{"role": "assistant", "content": "Sorry, it cannot be cancelled."}],
                       [{"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "x", "arguments": {}}}]}]]
        rewards = trace_environment_reward(completions, environments=environments, log_metric=logged.__setitem__)
        assert environments[0].messages[-2:][0] == {"role": "assistant", "content": "Sorry, it cannot be cancelled."}
        assert environments[0].messages[-1]["role"] == "user" and environments[1].messages[-1]["role"] == "user"  # no delivery
        assert rewards == [environments[0]._grade(), environments[1]._grade()] and rewards[0] > rewards[1]
        assert logged == {"trace/checked": 0.5, "trace/state": pytest.approx((environments[0].reward_components["state"] + environments[1].reward_components["state"]) / 2)}
    finally:
        for environment in environments:
            environment._close()
    with pytest.raises(ValueError, match="environment_factory"):
        trace_environment_reward(["hi"])


@pytest.mark.slow
def test_grpo_trainer_trains_two_steps_with_the_documented_line(vowels_id: str, tiny_model: Path, tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_chat_template

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.chat_template = qwen3_chat_template  # the tiny model is Qwen3-shaped; a real Qwen3 ships this template
    config = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4, max_steps=2, learning_rate=5e-3,
        max_completion_length=24, max_tool_calling_iterations=2, beta=0.0, use_cpu=True, report_to=[], save_strategy="no",
        logging_steps=1, bf16=False, disable_tqdm=True, seed=0,
    )
    # the documented line: nothing else between the env and the trainer
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model), processing_class=tokenizer, args=config,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"), **trace_environment(vowels_id, seeds=4),
    )
    trainer.train()
    assert trainer.state.global_step == 2
    lora_b = [p for name, p in trainer.model.named_parameters() if "lora_B" in name]
    assert lora_b and any(p.detach().abs().sum() > 0 for p in lora_b)  # LoRA starts with B = 0: the update moved it
    logged = [row for row in trainer.state.log_history if "reward" in row]
    assert len(logged) == 2
    for row in logged:  # vowels' one component is its reward: the env's grade is what TRL trained on
        assert 0 < row["reward"] == pytest.approx(row["rewards/trace_environment_reward/mean"]) == pytest.approx(row["trace/vowels"])
    assert any(row["reward_std"] > 0 for row in logged)
