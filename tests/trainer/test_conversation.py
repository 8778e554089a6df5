"""One renderer: an episode is the same token sequence in training and in evaluation, for a chat template
that renders tools (the tiny model's, Qwen-style) and one that renders neither tools nor calls (SmolLM2's),
and a text-only API reads the same Hermes text the template-less model was trained on."""

from __future__ import annotations

import copy

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from env_registry import conversation
from factory.rollout.hf import HFPolicy
from trainer.chat import ChatFormat
from trainer.config import RolloutSettings
from trainer.engines import Generated
from trainer.envpool import EnvPool
from trainer.rollout import collect_groups

# SmolLM2-135M-Instruct's chat template, verbatim: it renders role and content only (no tools, no calls).
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SAID = ["Let me look.", '<tool_call>{"name": "get_wifi_status", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "set_wifi_status", "arguments": {"on": true}}</tool_call>']


class Scripted:
    """An engine that says SAID, turn by turn, and records every context it was asked to continue."""

    def __init__(self, chat: ChatFormat) -> None:
        self.turns = [chat.encode(text) + [chat.eos_id] for text in SAID]
        self.contexts: list[list[int]] = []
        self.turn = 0

    def session(self, prompts: dict[int, list[int]]) -> "Scripted":
        self.live = {k: list(v) for k, v in prompts.items()}
        return self

    def extend(self, key: int, tokens: list[int]) -> None:
        self.live[key] += tokens

    def drop(self, keys: list[int]) -> None:
        for key in keys:
            self.live.pop(key, None)

    def generate(self) -> dict[int, Generated]:
        tokens = self.turns[self.turn]
        self.turn += 1
        out = {}
        for key, context in self.live.items():
            self.contexts.append(list(context))
            context += tokens
            out[key] = Generated(list(tokens), True)
        return out

    def sync(self, model, step) -> None:
        pass


@pytest.fixture(scope="module")
def pool(wifi_env: str):
    with EnvPool(wifi_env, sandbox="bwrap") as envs:
        yield envs


@pytest.fixture(scope="module", params=["renders-tools", "renders-nothing"])
def tokenizer(request, tiny_model):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    if request.param == "renders-nothing":
        tokenizer = copy.deepcopy(tokenizer)
        tokenizer.chat_template = SMOLLM2_TEMPLATE
    return tokenizer


def test_training_and_evaluation_see_the_same_tokens(tokenizer, tiny_model, pool) -> None:
    chat = ChatFormat(tokenizer)
    expect_support = tokenizer.chat_template != SMOLLM2_TEMPLATE
    assert (chat.renders_tools, chat.renders_calls) == (expect_support, expect_support)
    training = Scripted(chat)
    [rollout], _ = collect_groups(training, chat, pool, [7], 1, RolloutSettings(max_new_tokens=64, max_seq_len=4096))
    assert rollout.reward == 1.0 and rollout.turns == 3
    ids, _ = rollout.sequence()

    policy = HFPolicy(AutoModelForCausalLM.from_pretrained(tiny_model), tokenizer, "hf:tiny")
    evaluation = Scripted(policy.chat)
    policy.batcher.engine = evaluation
    env = pool.envs[0]
    _, info = env.reset(seed=7)
    messages, tools = info["messages"], info["tools"]
    act = policy.start(None, tools, seed=7)  # type: ignore[arg-type]
    for _ in SAID:
        _, reward, terminated, _, info = env.step(act(messages))
        messages = messages + [info["assistant_message"], *info["new_messages"]]
    assert terminated and reward == 1.0
    assert evaluation.contexts == training.contexts  # every turn generated from the same tokens
    assert evaluation.contexts[-1] + training.turns[-1] == ids  # ...which are the tokens trained on
    # the stateless path (messages alone) renders the same prompt for the first turn
    assert chat.conversation_ids(rollout.messages[:2], tools, generation_prompt=True)[0] == training.contexts[0]
    text = tokenizer.decode(ids)
    if not expect_support:  # the template shows neither: tools and calls are in the text, in the Hermes format
        assert '"name": "set_wifi_status"' in text.split("<|im_end|>")[0] and "<tool_response" in text


def test_a_text_api_reads_the_text_the_template_less_model_was_trained_on(tiny_model) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.chat_template = SMOLLM2_TEMPLATE
    chat = ChatFormat(tokenizer)
    tools = [{"type": "function", "function": {"name": "f", "description": "F", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "system", "content": "POLICY"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Looking.", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "1", "name": "f", "content": "R1"},
    ]
    system, dialogue = conversation.text_dialogue(messages, tools)
    as_api = tokenizer.apply_chat_template([{"role": "system", "content": system}, *dialogue], tokenize=False, add_generation_prompt=True)
    assert as_api == chat.render(messages, tools, generation_prompt=True)
